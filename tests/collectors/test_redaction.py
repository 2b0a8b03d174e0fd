"""Secrets never reach the database: env values, log text, Secret objects."""

from __future__ import annotations

import pytest

from collectors.sources.redact import REDACTED, is_secret_name, is_secret_object, redact_env, redact_text


@pytest.mark.parametrize(
    "name",
    [
        "WANDB_API_KEY",
        "HF_TOKEN",
        "DB_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "api-key",
        "GITHUB_TOKEN",
        "MYSQL_PWD",
        "OPENAI_API_KEY",
        "SLACK_WEBHOOK_AUTH",
        "passwd",
    ],
)
def test_it_redacts_env_values_whose_names_look_secret(name):
    assert redact_env({name: "hunter2-very-secret"}) == {name: REDACTED}


@pytest.mark.parametrize("name", ["EPOCHS", "NCCL_DEBUG", "PROJECT", "KEY_ID", "PUBLIC_KEY", "MONKEY_COUNT"])
def test_it_keeps_ordinary_env_values(name):
    assert redact_env({name: "42"}) == {name: "42"}
    assert not is_secret_name(name) or name == "KEY_ID"


def test_it_masks_credentials_inside_harmless_looking_values():
    assert redact_env({"DATABASE_URL": "postgres://app:s3cr3t@db:5432/app"}) == {
        "DATABASE_URL": "postgres://app:[redacted]@db:5432/app"
    }


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcDEF123456", "eyJhbGciOiJIUzI1NiJ9"),
        ("curl -H 'authorization: bearer abcdef0123456789abcdef'", "abcdef0123456789abcdef"),
        ("connecting with password=hunter2 to db", "hunter2"),
        ('{"password": "hunter2"}', "hunter2"),
        ("api_key: sk-abcdefghijklmnop", "sk-abcdefghijklmnop"),
        ("export TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnop"),
        ("wandb: using key wandb_v1_3f9c2a7e5d1b8f4a6c0e9d2b7a5f3c1e8d6b4a2f", "3f9c2a7e5d1b8f4a"),
    ],
)
def test_it_masks_tokens_and_passwords_in_log_text(text, leak):
    out = redact_text(text)
    assert leak not in out and REDACTED in out


def test_it_leaves_ordinary_log_lines_alone():
    line = "2026-11-29T03:12:00Z epoch 3 loss=0.412 lr=0.001 step 1200/5000"
    assert redact_text(line) == line


def test_it_recognizes_secret_objects_with_or_without_kind():
    assert is_secret_object({"kind": "Secret", "data": {}})
    assert is_secret_object(
        {"metadata": {"name": "db"}, "type": "Opaque", "data": {"password": "aHVudGVyMg=="}}
    )
    assert not is_secret_object({"kind": "Event", "type": "Warning"})
    assert not is_secret_object({"kind": "ConfigMap", "data": {"a": "b"}})


def test_it_never_stores_a_secret_value_from_a_pod_spec():
    from collectors.mapping import map_pod

    pod = {
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "env": [
                        {
                            "name": "WANDB_API_KEY",
                            "value": "wandb_v1_3f9c2a7e5d1b8f4a6c0e9d2b7a5f3c1e8d6b4a2f",
                        },
                        {"name": "S3_SECRET", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "secret"}}},
                        {"name": "NOTE", "value": "login with password=hunter2"},
                    ],
                }
            ]
        },
        "status": {},
    }
    env = map_pod(pod).state["containers"][0]["env"]
    assert env == {
        "WANDB_API_KEY": REDACTED,
        "S3_SECRET": "(from secret s3/secret)",
        "NOTE": f"login with password={REDACTED}",
    }
