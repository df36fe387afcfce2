"""GET /counters/{name}/next hands out an ID, like POST. Browsers' prefetch,
link previewers and crawlers follow GETs and each burns an ID, so the
AllowGetNext parameter turns GET off: 405 method_not_allowed, Allow: POST."""

from __future__ import annotations

from localrun.openapi import document

NEXT = "/counters/{name}/next"


def test_get_next_hands_out_an_id_by_default(api, template):
    assert template.parameters["AllowGetNext"] == "true"
    assert api.call("next-get", name="orders").body["id"] == 1
    assert api.call("next-post", name="orders").body["id"] == 2


def test_get_next_turned_off_is_405_and_takes_nothing(api, lambda_env, table_snapshot):
    lambda_env(ALLOW_GET_NEXT="false")
    assert api.call("next-post", name="orders").body["id"] == 1
    before = table_snapshot()

    reply = api.call("next-get", name="orders")
    assert (reply.status, reply.error_code) == (405, "method_not_allowed")
    assert "POST" in reply.body["error"]["message"]
    assert reply.headers["Allow"] == "POST"
    assert reply.headers["Cache-Control"] == "no-store"
    assert table_snapshot() == before
    # POST is untouched, and nothing was skipped
    assert api.call("next-post", name="orders").body["id"] == 2


def test_get_next_turned_off_refuses_before_looking_at_the_key(api, lambda_env, table_snapshot):
    lambda_env(ALLOW_GET_NEXT="false")
    before = table_snapshot()
    reply = api.call("next-get", name="orders", headers={"Idempotency-Key": "k"})
    assert reply.status == 405
    assert table_snapshot() == before  # no idempotency record either


def test_the_template_passes_the_switch_to_the_functions(template):
    spec = template.raw["Parameters"]["AllowGetNext"]
    assert spec["AllowedValues"] == ["true", "false"]
    env = template.resources["NextFunction"]["Properties"]["Environment"]["Variables"]
    assert env["ALLOW_GET_NEXT"] == {"Ref": "AllowGetNext"}


def test_the_openapi_document_follows_the_switch(monkeypatch):
    assert set(document()["paths"][NEXT]) == {"get", "post"}
    monkeypatch.setenv("ALLOW_GET_NEXT", "false")
    assert set(document()["paths"][NEXT]) == {"post"}
