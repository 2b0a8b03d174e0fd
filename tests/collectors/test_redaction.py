"""Secrets never reach the database: env values, log text, Secret objects."""

from __future__ import annotations

import pytest

from collectors.sources.redact import (
    REDACTED,
    is_secret_name,
    is_secret_object,
    redact_env,
    redact_text,
    redact_value,
)


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


#
# Issue 17, finding 1: each shape below passed the redaction before (one test per finding).
#


def test_it_masks_every_credential_of_the_attack_line():
    line = "password=hunter2 Authorization: Bearer abc.def --db-password hunter3 secret_key = hunter4"
    out = redact_text(line)
    for leak in ("hunter2", "abc.def", "hunter3", "hunter4"):
        assert leak not in out
    assert out == (
        f"password={REDACTED} Authorization: Bearer {REDACTED} --db-password {REDACTED} secret_key = {REDACTED}"
    )


@pytest.mark.parametrize(
    ("text", "leak"),
    [
        ("Authorization: Bearer abc", "abc"),  # short bearer tokens
        ("authorization: bearer a.b", "a.b"),
        ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),  # base64("user:hunter2")
        ("retrying with Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
        ("Proxy-Authorization: Digest-less-token-xyz", "Digest-less-token-xyz"),
        ("--password x", " x"),
        ("--password=hunter5 --epochs 3", "hunter5"),
        ("mysql --db-password 'hunter 6'", "hunter 6"),
        ("secret_key = hunter4", "hunter4"),
        ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
        ("client_secret: hunter7", "hunter7"),
        (
            "posting to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "XXXXXXXX",
        ),
        ("https://discord.com/api/webhooks/123456/abcdefTOKEN", "abcdefTOKEN"),
        ("https://acme.webhook.office.com/webhookb2/aaaa-bbbb/IncomingWebhook/cccc/dddd", "IncomingWebhook"),
        ("git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/x/y", "ghp_abcdef"),
        ("redis://:hunter8@redis:6379/0", "hunter8"),
        ("id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),  # AWS's documented example key id
        ("sts ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
        ("key=AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_11ABCDEFG"),
        ("glpat-abcdefghijklmnopqrst", "glpat-abcdefghijklmnopqrst"),
        ("hf_abcdefghijklmnopqrstuvwxyzABCDEF", "hf_abcdefghijklmnop"),
        ("sk_live_abcdefghijklmnop1234", "sk_live_abcdefghijklmnop1234"),
        ("jwt eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0In0.", "eyJzdWIiOiIxMjM0In0"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq\nhunter9\n-----END RSA PRIVATE KEY-----",
            "hunter9",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA (truncated)", "b3BlbnNzaC1rZXkt"),
    ],
)
def test_it_masks_the_credential_shapes_that_passed_before(text, leak):
    out = redact_text(text)
    assert leak not in out and REDACTED in out


@pytest.mark.parametrize(
    "line",
    [
        "basic setup done in 3.2s",
        "token bucket refilled",
        "author: alice committed 3 files",
        "-p 5432 --epochs 3 --lr=0.001",
        "TOKENIZERS_PARALLELISM=false",
        "see https://hooks.example.org for the docs",
    ],
)
def test_it_leaves_lines_that_only_resemble_credentials_alone(line):
    assert redact_text(line) == line


@pytest.mark.parametrize(
    "name", ["AUTHORIZATION", "PASSPHRASE", "GITHUB_PAT", "CLIENTSECRET", "clientSecret", "DB_PASSPHRASE"]
)
def test_it_redacts_env_names_that_passed_before(name):
    assert redact_env({name: "hunter2"}) == {name: REDACTED}


@pytest.mark.parametrize(
    "name", ["TOKENIZERS_PARALLELISM", "PATH", "PATCH_LEVEL", "AUTHOR", "sessionAffinity"]
)
def test_it_keeps_env_names_that_only_contain_secret_words(name):
    assert not is_secret_name(name)


def test_it_masks_secret_named_fields_and_strings_in_structured_values():
    value = {
        "taints": [{"key": "nvidia.com/gpu", "value": "present"}],  # a taint's "key" is not a credential
        "clientSecret": "hunter2",
        "args": ["--token", "hunter3", "--epochs", "3"],
        "n": 3,
    }
    assert redact_value(value) == {
        "taints": [{"key": "nvidia.com/gpu", "value": "present"}],
        "clientSecret": REDACTED,
        "args": ["--token", REDACTED, "--epochs", "3"],  # argv: the value follows its flag as the next item
        "n": 3,
    }
    assert "hunter2" not in str(redact_value(value))


def test_it_redacts_container_termination_and_waiting_messages():
    from collectors.mapping import map_pod

    pod = {
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {
            "message": "evicted; DATABASE_URL=postgres://u:hunter1@db/x",
            "containerStatuses": [
                {
                    "name": "c",
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "token=hunter2"}},
                    "lastState": {
                        "terminated": {
                            "reason": "Error",
                            "exitCode": 1,
                            # /dev/termination-log: the container's last words, often a traceback with its config
                            "message": "ConnectionError: login failed for --password hunter3",
                        }
                    },
                }
            ],
        },
    }
    state = map_pod(pod).state
    c = state["containers"][0]
    assert (
        c["last_state"]["terminated"]["message"] == f"ConnectionError: login failed for --password {REDACTED}"
    )
    assert c["last_state"]["terminated"]["exitCode"] == 1
    assert "hunter2" not in str(c["state"]) and "hunter1" not in state["message"]


def test_a_pem_block_split_over_log_lines_is_masked_line_by_line():
    from collectors.sources.redact import redact_value

    lines = [
        "starting",
        "-----BEGIN PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0Bzz",
        "AAECAwQF",
        "-----END PRIVATE KEY-----",
        "done",
    ]
    out = redact_value(lines)
    assert out[0] == "starting" and out[-1] == "done"
    assert "MIIEvQIBADANBgkqhkiG9w0Bzz" not in str(out) and "AAECAwQF" not in str(out)
