"""The redaction policy against a corpus: secret shapes masked whole, near-misses left readable (issue 42, item 3).

Each secret below is ``S3CR3T`` plus, in the ``HOSTILE`` cases, the characters that cut a value short before
(``; & ' <``): whatever it holds, no part of it may survive. Each near-miss must come back unchanged.
"""

from __future__ import annotations

import pytest

from collectors.sources.redact import REDACTED, is_secret_name, redact_text, redact_value

SECRET = "S3CR3T"
HOSTILE = "S3;CR&3T'x<y"  # the tail ("CR&3T'x<y") is what leaked before


@pytest.mark.parametrize(
    "text",
    [
        # CLI password flags
        "mysql -u root -pS3CR3T",
        "mysql -uroot -p'S3CR3T' -h db",
        "mysqldump -h db -pS3CR3T app > dump.sql",
        "docker login -p S3CR3T registry.example",
        "docker login -u bot -p S3CR3T registry.example",
        "sshpass -p S3CR3T ssh node-1",
        "mongosh -u admin -p S3CR3T --authenticationDatabase admin",
        "psql --password S3CR3T",
        "--password S3CR3T",
        "--password=S3CR3T",
        "--db-password 'S3CR3T'",
        'run --api-key="S3CR3T"',
        # user:pass after -u
        "curl -u admin:S3CR3T https://api.example/v1",
        "curl -uadmin:S3CR3T https://api.example/v1",
        "curl --user admin:S3CR3T https://api.example/v1",
        "curl --user=admin:S3CR3T https://api.example/v1",
        "curl -u 'admin:S3CR3T' https://api.example/v1",
        "docker run --rm curlimages/curl curl -u admin:S3CR3T https://api.example/v1",
        # bearer tokens, quoted or not
        "Bearer S3CR3T",
        'Bearer "S3CR3T"',
        "bearer 'S3CR3T'",
        "Authorization: Bearer S3CR3T",
        "curl -H 'Authorization: Bearer S3CR3T' https://api.example",
        'headers={"Authorization": "Bearer S3CR3T"}',
        "Authorization: token S3CR3T",
        '> Authorization: Digest username="bob", realm="api", response="S3CR3T"',
        'curl -H \'Authorization: Digest username="bob", response="S3CR3T"\' https://api.example',
        'headers={"Authorization": "Bearer abc S3CR3T"}',
        "<a href='/x?a=1&amp;token=S3CR3T'>",
        # URLs: userinfo and secret-named query parameters
        "http://user:S3CR3T@prom:9090",
        "cannot connect to http://user:S3CR3T@prom:9090: connection refused",
        "https://u:S3CR3T@git.example/x.git",
        "https://git.example/x?token=S3CR3T",
        "https://git.example/x?a=1&access_token=S3CR3T#top",
        "https://maps.example/api?key=S3CR3T",
        "https://bucket.example/o?X-Amz-Credential=AK%2F1&X-Amz-Signature=S3CR3T",
        "postgres://app:S3CR3T@db:5432/app",
        # JSON, YAML, ini, env, logfmt, XML keys that name secrets, in any case and nesting
        '{"password": "S3CR3T"}',
        '{"Password":"S3CR3T"}',
        '{"db": {"auth": {"PASSWORD": "S3CR3T"}}}',
        '{"password": 123456S3CR3T, "user": "x"}',
        '{"api_key": "S3CR3T"}',
        '{"private_key": "S3CR3T"}',
        '{"client_secret": "S3CR3T"}',
        '{"credential": "S3CR3T"}',
        '{"passwd": "S3CR3T"}',
        '{"token": "S3CR3T"}',
        '{"password": "S3\\"CR3T"}',
        'message="{\\"password\\": \\"S3CR3T\\"}"',
        "{'password': 'S3CR3T'}",
        "db:\n  user: app\n  password: S3CR3T\n",
        "db:\n  Password: 'S3CR3T'\n",
        "db:\n  password: |\n    S3CR3T\n    S3CR3T\n  host: db\n",
        "private_key: >-\n  S3CR3T\n",
        "token:\n  S3CR3T\n",
        "- token: S3CR3T",
        "[client]\npassword = S3CR3T words\n",
        "PASSWORD=S3CR3T",
        "export DB_PASSWORD=S3CR3T",
        "level=error msg=login password=S3CR3T user=bob",
        "API_KEY: S3CR3T",
        "secretKey: S3CR3T",
        "<password>S3CR3T</password>",
        "password=abc;S3CR3T",
        "token: abc&S3CR3T",
        "passwd=abc'S3CR3T",
        "pwd=abc<S3CR3T",
    ],
)
def test_it_masks_every_secret_shape_whole(text: str) -> None:
    out = redact_text(text)
    assert REDACTED in out, out
    for part in ("S3CR3T", "CR3T", "3CR"):
        assert part not in out, out


@pytest.mark.parametrize(
    "template",
    [
        "password={}",
        "password={} trailing words",
        "password: {}",
        "--password {}",
        "--password={}",
        "-p{} (mysql -u root)",
        "curl -u admin:{}",
        "Bearer {}",
        "token={}",
        "API_KEY={}",
    ],
)
def test_it_masks_a_value_whole_whatever_characters_it_holds(template: str) -> None:
    out = redact_text(template.format(HOSTILE))
    for part in ("CR", "3T", "x<y", "&3"):
        assert part not in out, out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mysql -u root -pS3CR3T", f"mysql -u root -p{REDACTED}"),
        ("docker login -p S3CR3T", f"docker login -p {REDACTED}"),
        ("curl -u admin:S3CR3T", f"curl -u admin:{REDACTED}"),
        ("curl -u 'admin:S3CR3T' x", f"curl -u 'admin:{REDACTED}' x"),
        ('{"password": "S3CR3T"}', f'{{"password": "{REDACTED}"}}'),
        ("{password: S3CR3T}", f"{{password: {REDACTED}}}"),
        ("password=abc;S3CR3T", f"password={REDACTED}"),
        ('Bearer "S3CR3T"', f'Bearer "{REDACTED}"'),
        (
            "https://u:S3CR3T@x.example/p?token=S3CR3T&a=1",
            f"https://u:{REDACTED}@x.example/p?token={REDACTED}&a=1",
        ),
        ("[db]\npassword = two words\nhost = db", f"[db]\npassword = {REDACTED}\nhost = db"),
        ("KeyError: 'lr'  (token=abc123)", f"KeyError: 'lr'  (token={REDACTED})"),
        ("db:\n  password: |\n    S3CR3T\n  host: db", f"db:\n  password: |\n    {REDACTED}\n  host: db"),
        ("credentials:\n  user: bob\n  pass: S3CR3T", f"credentials:\n  user: bob\n  pass: {REDACTED}"),
    ],
)
def test_it_keeps_what_surrounds_the_secret(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "line",
    [
        "KeyError: 'DB_HOST'",
        "KeyError: 'DB_PASSWORD'",  # the name of a missing setting, not its value
        "KeyError: 'tokenizer_path' (config schema 2 expects data.tokenizer.path)",
        "TokenExpiredError: 'session 42'",
        "key: nvidia.com/gpu",
        "cache_key=abc123 sort_key=3",
        "-p 5432 --epochs 3 --lr=0.001",
        "ssh -p 2222 node-1",
        "psql -U app -p 5432 -h db",
        "kubectl logs -p trainer-0",
        "docker run -u 1000:1000 -p 8080:80 img",
        "docker exec -u www-data:www-data web ls",
        "mkdir -p /data/ckpt",
        "curl -u admin https://api.example/v1",
        "pip install -U torch",
        "max_tokens=512 prompt_tokens: 1200 tokens/s=4000",
        "token bucket refilled",
        "Bearer token expired",
        "basic setup done in 3.2s",
        "author: alice committed 3 files",
        "password_file: /run/secrets/db",
        "secretName: db-creds",
        "DB_PASSWORD_FILE=/run/secrets/db",
        "docker login --password-stdin < /run/secrets/registry",
        "http://prom:9090/api/v1/query?query=up&time=1764386000",
        "https://search.example/?q=password+reset",
        "see https://hooks.example.org for the docs",
        "TOKENIZERS_PARALLELISM=false",
        "Xid 79 on GPU 0000:3b:00.0: GPU has fallen off the bus",
        "loss=0.412 lr=0.001 step 1200/5000",
    ],
)
def test_it_leaves_near_misses_readable(line: str) -> None:
    assert redact_text(line) == line


@pytest.mark.parametrize(
    "name", ["api_key", "PRIVATE_KEY", "sshKey", "WANDB_API_KEY", "encryption_key", "passwd", "Credential"]
)
def test_it_takes_qualified_keys_for_secrets(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["KeyError", "key", "Key", "primary_key", "partition_key", "secretName", "PASSWORD_FILE", "token_count"],
)
def test_it_takes_bare_keys_and_names_about_secrets_for_names(name: str) -> None:
    assert not is_secret_name(name)


def test_it_masks_secret_fields_at_any_depth_and_their_named_values() -> None:
    value = {
        "spec": {"db": {"Password": "S3CR3T", "passwords": ["S3CR3T", "S3CR3T"], "token": 123456}},
        "env": [{"name": "DB_PASSWORD", "value": "S3CR3T"}, {"name": "EPOCHS", "value": "3"}],
        "change": {"field": "spec.auth.password", "old": "S3CR3T", "new": "S3CR3T"},
        "imagePullSecrets": [{"name": "regcred"}],
        "token_set": True,
    }
    out = redact_value(value)
    assert "S3CR3T" not in str(out) and "123456" not in str(out)
    assert out["env"][1] == {"name": "EPOCHS", "value": "3"}
    assert out["imagePullSecrets"] == [{"name": "regcred"}]
    assert out["change"]["field"] == "spec.auth.password"
