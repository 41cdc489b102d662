"""Signing in through the page: an HttpOnly session cookie, the key in no page script, read views with a read key,
sign-out, and an expired session explained on the page."""

from __future__ import annotations

from playwright.sync_api import expect

from lamarck.platform.container import Container

from .conftest import Browse
from .loop_data import running_loop


def test_sign_in_sets_an_httponly_cookie_and_the_key_stays_out_of_page_scripts(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    loop = running_loop(container)
    key = keys["read"]["Authorization"].removeprefix("Bearer ")
    scripts: list[str] = []
    browse.page.on("response", lambda r: r.request.resource_type == "script" and scripts.append(r.text()))

    browse.goto("/ui/")
    expect(browse.page.locator("#message")).to_contain_text("Sign in with an API key")
    browse.page.get_by_role("link", name="Sign in").first.click()
    browse.page.fill("#key", key)
    browse.page.click("input[type=submit]")
    expect(browse.page.locator("#runs")).to_contain_text("loop")
    assert browse.page.url == browse.url("/ui/")

    (cookie,) = browse.context.cookies()
    assert cookie["name"] == "lamarck_session" and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/" and key not in cookie["value"]
    assert browse.page.evaluate("document.cookie") == ""
    assert scripts and not any(key in text for text in scripts)
    assert key not in browse.page.content()
    expect(browse.page.locator("#session")).to_contain_text("(read)")

    browse.page.get_by_role("link", name="loop").click()
    expect(browse.page.locator("#status")).to_have_text("running")
    expect(browse.page.locator("#stop")).to_be_disabled()  # a read key may look, not stop
    expect(browse.page.locator("#control-note")).to_contain_text("runs scope")
    assert loop.run_id in browse.page.url
    expect(browse.page.locator("#stream-state")).to_have_text("live")

    browse.page.click("#sign-out")
    expect(browse.page.locator("h1")).to_have_text("Sign in")
    assert browse.context.cookies() == []


def test_a_wrong_key_and_an_expired_session_are_explained_on_the_page(
    browse: Browse, keys: dict[str, dict[str, str]]
) -> None:
    browse.goto("/ui/signin.html")
    browse.page.fill("#key", "lmk_0000_not-a-key")
    browse.page.click("input[type=submit]")
    expect(browse.page.locator("#message")).to_contain_text("unknown or revoked")

    browse.sign_in(keys["read"]["Authorization"].removeprefix("Bearer "))
    browse.goto("/ui/")
    expect(browse.page.locator("#session")).to_contain_text("read")
    expect(browse.page.locator("#message")).to_contain_text("No runs yet")  # the page's last call answered
    browse.server.clock.now += 7200  # past the session's hour
    browse.page.reload()
    expect(browse.page.locator("#message")).to_contain_text("Your sign-in has expired")
    browse.page.get_by_role("link", name="Sign in").first.click()
    expect(browse.page.locator("#message")).to_contain_text("expired")


def test_a_sign_in_survives_a_restart_of_the_server(browse: Browse, keys: dict[str, dict[str, str]]) -> None:
    browse.goto("/ui/signin.html")
    browse.page.fill("#key", keys["read"]["Authorization"].removeprefix("Bearer "))
    browse.page.click("input[type=submit]")
    expect(browse.page.locator("#session")).to_contain_text("(read)")
    browse.server.stop()
    browse.server.start()  # a new app and session store over the same database
    browse.page.reload()
    expect(browse.page.locator("#session")).to_contain_text("(read)")
    expect(browse.page.locator("#message")).to_contain_text("No runs yet")
