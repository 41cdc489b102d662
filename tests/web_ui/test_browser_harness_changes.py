"""Promoting and rolling back a harness from its lineage page, in a real browser: each asks first in a dialog that
says what changes and where (the environment), calls the API with the session cookie and shows the result; cancel
sends nothing; an error from the API is shown as its message and the page stays as it was."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from api.test_harnesses import _archive
from lamarck.agents.harness import promoted_harness
from lamarck.agents.harness_archive import rollback_harness
from lamarck.platform.container import Container

from .conftest import Browse


def _key(keys: dict[str, dict[str, str]], name: str) -> str:
    return keys[name]["Authorization"].removeprefix("Bearer ")


def _served(container: Container, environment: str = "arithmetic") -> str | None:
    with container.db.session() as session:
        return promoted_harness(session, environment)


def test_promote_then_roll_back_a_harness_with_confirmation(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    root, cooler, prompted = _archive(container)
    browse.sign_in(_key(keys, "all"))
    page = browse.page
    posts: list[str] = []

    def note(request: Any) -> None:
        if request.method == "POST":
            posts.append(request.url)

    page.on("request", note)
    browse.goto("/ui/harnesses.html?environment=arithmetic")
    expect(page.locator(f'#tree g.node.promoted[data-id="{root}"]')).to_have_count(1)
    expect(page.locator("#promote")).to_be_disabled()  # the served one
    expect(page.locator("#rollback")).to_be_disabled()  # the root replaced nothing

    page.locator(f'#tree g.node[data-id="{cooler}"]').click()
    expect(page.locator("#detail")).to_contain_text(f"Harness {cooler}")
    page.click("#promote")
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_be_visible()
    expect(dialog.locator("h2")).to_have_text(f"Promote harness {cooler}?")
    changes = dialog.locator("#confirm-changes li")
    expect(changes.nth(0)).to_have_text(f"arithmetic is served with {cooler} instead of {root}.")
    expect(changes.nth(1)).to_contain_text(f"{root} is retired and kept")
    expect(dialog.locator("#confirm-scope")).to_contain_text("the arithmetic environment only")
    expect(dialog.locator("#confirm-scope")).to_contain_text("the model champion does not change")

    dialog.locator("#confirm-cancel").click()  # cancel: nothing sent, nothing changed
    expect(dialog).to_have_count(0)
    expect(page.locator(f'#tree g.node.promoted[data-id="{root}"]')).to_have_count(1)
    assert posts == [] and _served(container) == root

    page.click("#promote")
    page.keyboard.press("Escape")  # closing the dialog is a no as well
    expect(dialog).to_have_count(0)
    assert posts == [] and _served(container) == root

    page.click("#promote")
    dialog.locator("#confirm-ok").click()
    message = page.locator("#message")
    expect(message).to_be_visible()
    expect(message).to_have_text(f"Promote harness {cooler}: arithmetic is now served with {cooler}.")
    expect(page.locator(f'#tree g.node.promoted[data-id="{cooler}"]')).to_have_count(1)
    expect(page.locator(f'#tree g.node.retired[data-id="{root}"]')).to_have_count(1)
    expect(page.locator("#detail")).to_contain_text(f"Harness {cooler}")
    expect(page.locator("#detail dl")).to_contain_text(f"replaced{root}")
    assert posts == [browse.url(f"/v1/harnesses/{cooler}/promote")] and _served(container) == cooler
    assert prompted  # untouched: still a candidate under cooler

    rollback = page.locator("#rollback")
    expect(rollback).to_have_text("Roll back arithmetic's harness")
    expect(rollback).to_be_enabled()
    rollback.click()
    expect(dialog.locator("h2")).to_have_text("Roll back arithmetic's harness?")
    expect(changes.nth(0)).to_have_text(f"arithmetic is served with {root} again: {cooler} replaced it.")
    expect(dialog.locator("#confirm-scope")).to_contain_text("the arithmetic environment only")
    dialog.locator("#confirm-ok").click()
    expect(message).to_have_text(f"Roll back arithmetic's harness: arithmetic is now served with {root}.")
    expect(page.locator(f'#tree g.node.promoted[data-id="{root}"]')).to_have_count(1)
    expect(page.locator(f'#tree g.node.retired[data-id="{cooler}"]')).to_have_count(1)
    expect(page.locator("#detail")).to_contain_text(f"Harness {root}")
    assert posts[-1] == browse.url("/v1/harnesses/rollback") and _served(container) == root


def test_an_api_error_is_shown_as_its_message_and_the_page_stays(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    root, cooler, _ = _archive(container)
    browse.sign_in(_key(keys, "all"))
    page = browse.page
    browse.goto("/ui/harnesses.html?environment=arithmetic")
    page.locator(f'#tree g.node[data-id="{cooler}"]').click()
    page.click("#promote")
    page.locator("#confirm-ok").click()
    expect(page.locator("#message")).to_contain_text(f"now served with {cooler}")
    expect(page.locator(f'#tree g.node.promoted.selected[data-id="{cooler}"]')).to_have_count(1)
    expect(page.locator("#rollback")).to_be_enabled()

    with container.db.session() as session:  # someone else rolls back meanwhile: this page still shows cooler served
        rollback_harness(session, "arithmetic")
    tree_before = page.locator("#tree").inner_html()
    detail_before = page.locator("#detail").inner_html()
    browse.expect_console("status of 409")
    page.click("#rollback")
    page.locator("#confirm-ok").click()
    message = page.locator("#message")
    expect(message).to_have_class("message error")
    expect(message).to_have_text(
        f"Roll back arithmetic's harness: {root} has no previous harness to roll back to: nothing to roll back"
    )
    assert page.locator("#tree").inner_html() == tree_before
    assert page.locator("#detail").inner_html() == detail_before
    assert page.locator("#api-down").count() == 0  # a refusal is not the API being down
    assert _served(container) == root


def test_a_read_key_sees_the_harness_lineage_without_the_controls(
    browse: Browse, keys: dict[str, dict[str, str]], container: Container
) -> None:
    _archive(container)
    browse.sign_in(_key(keys, "read"))
    browse.goto("/ui/harnesses.html?environment=arithmetic")
    expect(browse.page.locator("#detail")).to_contain_text("need a key with the models scope")
    expect(browse.page.locator("#promote")).to_have_count(0)
    expect(browse.page.locator("#rollback")).to_have_count(0)
