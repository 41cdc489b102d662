"""Signing in for a session cookie, over the API app: the cookie's attributes, the cookie as an alternative to the
Bearer key (GET freely, writes only with this site's Origin), bad keys and bad destinations, sign-out, revocation."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.conftest import error_of
from lamarck.api.keys import Scope, create_key
from lamarck.platform.container import Container
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo

ORIGIN = {"Origin": "http://testserver"}


def _run(container: Container) -> str:
    with container.db.session() as session:
        return repo.create_run(session, config={"environments": ["arithmetic"]}, name="r").id


def test_json_sign_in_sets_an_httponly_strict_cookie_that_reads_the_api(
    client: TestClient, container: Container
) -> None:
    key_id, key = create_key(container.db, [Scope.READ])
    signed = client.post("/ui/session", json={"key": key}, headers=ORIGIN)
    assert signed.status_code == 200, signed.text
    assert signed.json() == {"signed_in": True, "expired": False, "key_id": key_id, "scopes": ["read"]}
    cookie = signed.headers["set-cookie"]
    assert cookie.startswith("lamarck_session=") and key not in cookie
    assert all(part in cookie for part in ("HttpOnly", "SameSite=strict", "Path=/"))
    assert "Secure" not in cookie  # plain http on loopback; set over https
    assert client.get("/v1/runs").status_code == 200
    assert client.get("/ui/session").json()["signed_in"] is True
    assert "'runs' scope" in error_of(client.post(f"/v1/runs/{_run(container)}/stop", headers=ORIGIN), 403)


def test_a_cookie_write_needs_this_sites_origin(client: TestClient, container: Container) -> None:
    _, key = create_key(container.db, [Scope.READ, Scope.RUNS])
    client.post("/ui/session", json={"key": key})
    run_id = _run(container)
    assert "Origin" in error_of(client.post(f"/v1/runs/{run_id}/stop"), 403)
    assert "Origin" in error_of(client.post(f"/v1/runs/{run_id}/stop", headers={"Origin": "http://evil.test"}), 403)
    with container.db.session() as session:
        assert repo.get_run(session, run_id=run_id).status == "pending"
    stopped = client.post(f"/v1/runs/{run_id}/stop", headers=ORIGIN)
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"


def test_bad_keys_and_requests_are_refused(client: TestClient, container: Container) -> None:
    assert "unknown or revoked" in error_of(client.post("/ui/session", json={"key": "lmk_00_nope"}), 401)
    error_of(client.post("/ui/session", json={}), 422)
    error_of(client.post("/ui/session", content=b"{", headers={"Content-Type": "application/json"}), 400)
    error_of(client.post("/ui/session", content=b"key", headers={"Content-Type": "text/plain"}), 415)
    _, key = create_key(container.db, [Scope.READ])
    assert "own sign-in page" in error_of(
        client.post("/ui/session", json={"key": key}, headers={"Origin": "http://evil.test"}), 403
    )
    assert "set-cookie" not in client.post("/ui/session", json={"key": "x"}).headers
    form = client.post("/ui/session", data={"key": "lmk_00_nope"}, follow_redirects=False)
    assert form.status_code == 303 and form.headers["location"] == "/ui/signin.html?error=unknown_key"
    empty = client.post("/ui/session", data={"next": "/ui/"}, follow_redirects=False)
    assert empty.headers["location"] == "/ui/signin.html?error=unknown_key"


@pytest.mark.parametrize(
    ("wanted", "landing"),
    [
        ("/ui/run.html?id=abc", "/ui/run.html?id=abc"),
        ("//evil.test/ui/", "/ui/"),
        ("https://evil.test/", "/ui/"),
        ("/ui//evil.test", "/ui/"),
        ("/v1/runs", "/ui/"),
    ],
)
def test_a_form_sign_in_lands_only_on_a_page_of_the_ui(
    client: TestClient, container: Container, wanted: str, landing: str
) -> None:
    _, key = create_key(container.db, [Scope.READ])
    signed = client.post("/ui/session", data={"key": key, "next": wanted}, headers=ORIGIN, follow_redirects=False)
    assert signed.status_code == 303 and signed.headers["location"] == landing
    assert "HttpOnly" in signed.headers["set-cookie"]


def test_sign_out_and_revocation_end_the_session(client: TestClient, container: Container) -> None:
    key_id, key = create_key(container.db, [Scope.READ])
    client.post("/ui/session", json={"key": key})
    assert client.delete("/ui/session", headers={"Origin": "http://evil.test"}).status_code == 403
    token = client.cookies["lamarck_session"]
    assert client.delete("/ui/session", headers=ORIGIN).status_code == 204
    client.cookies.set("lamarck_session", token)  # a copy kept from before sign-out
    message = error_of(client.get("/v1/runs"), 401)
    assert "sign in again" in message and client.get("/v1/runs").json()["error"]["code"] == "session_expired"
    assert client.get("/ui/session").json() == {"signed_in": False, "expired": True, "key_id": None, "scopes": []}

    client.post("/ui/session", json={"key": key})
    assert client.get("/v1/runs").status_code == 200
    with container.db.session() as session:
        api_repo.revoke_api_key(session, key_id=key_id)
    error_of(client.get("/v1/runs"), 401)
    assert client.get("/ui/session").json()["expired"] is True


def test_the_bearer_key_wins_over_the_cookie(client: TestClient, container: Container) -> None:
    _, read = create_key(container.db, [Scope.READ])
    _, runs = create_key(container.db, [Scope.RUNS])
    client.post("/ui/session", json={"key": read})
    stopped = client.post(f"/v1/runs/{_run(container)}/stop", headers={"Authorization": f"Bearer {runs}"})
    assert stopped.status_code == 200  # no Origin needed: a Bearer key is no ambient credential
    assert "'read' scope" in error_of(client.get("/v1/runs", headers={"Authorization": f"Bearer {runs}"}), 403)
