"""A corpus of credentials in the formats people paste, print and read into agents: each
``(pattern name, text as it appears, the secret part that must never be stored)``. All are
made up; none is a live credential."""

from __future__ import annotations

PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBqZ3Vlc3NpbmdJc05vdEFTdHJhdGVneUZvcktleXMAAAAAAAAAAAAAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

CORPUS: tuple[tuple[str, str, str], ...] = (
    ("private_key", f"cat ~/.ssh/id_ed25519\n{PRIVATE_KEY}\n", PRIVATE_KEY.splitlines()[1]),
    (
        "private_key",
        "-----BEGIN RSA PRIVATE KEY-----\n"
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw",
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw",
    ),
    ("aws_access_key", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    (
        "github_token",
        "git remote set-url origin https://ghp_R2d2C3poBb8Luke4Leia5Han6Solo7Yoda8x@github.com/a/b",
        "ghp_R2d2C3poBb8Luke4Leia5Han6Solo7Yoda8x",
    ),
    (
        "github_token",
        "GH token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF",
    ),
    ("gitlab_token", "use glpat-Zx81Kq0LmN2pQr7sTu4v please", "glpat-Zx81Kq0LmN2pQr7sTu4v"),
    (
        "slack_token",
        "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    (
        "slack_webhook",
        "curl -X POST https://hooks.slack.com/services/T0AAA0AAA/B0BBB0BBB/cCcCcCcCcCcCcCcCcCcCcCcC",
        "B0BBB0BBB/cCcCcCcCcCcCcCcCcCcCcCcC",
    ),
    (
        "anthropic_key",
        "my key is sk-ant-api03-Qm9vYmFyQmF6UXV4UXV1eENvcmdlR3JhdWx0R2FycGx5",
        "sk-ant-api03-Qm9vYmFyQmF6UXV4UXV1eENvcmdlR3JhdWx0R2FycGx5",
    ),
    (
        "openai_key",
        "OPENAI: sk-proj-7hFq2Lm9Rt4Wx8Zc1Vb6Nn3Kp0Yd5Gs",
        "sk-proj-7hFq2Lm9Rt4Wx8Zc1Vb6Nn3Kp0Yd5Gs",
    ),
    (
        "stripe_key",
        "stripe.api_key = sk_live_51H8k2LmNpQrStUvWxYz012345",
        "sk_live_51H8k2LmNpQrStUvWxYz012345",
    ),
    (
        "google_api_key",
        "https://maps.googleapis.com/maps/api?key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    ),
    (
        "huggingface_token",
        "huggingface-cli login --token hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    ),
    (
        "npm_token",
        "//registry.npmjs.org/:_authToken=npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    ),
    (
        "pypi_token",
        "password = pypi-AgEIcHlwaS5vcmcCJDEyMzQ1Njc4LTkwYWItY2RlZi0xMjM0LTU2Nzg5MGFiY2RlZgACKlsz",
        "pypi-AgEIcHlwaS5vcmcCJDEyMzQ1Njc4LTkwYWItY2RlZi0xMjM0LTU2Nzg5MGFiY2RlZgACKlsz",
    ),
    (
        "sendgrid_key",
        "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",
        "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
    ),
    (
        "twilio_key",
        "TWILIO SK2f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
        "SK2f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
    ),
    (
        "cairn_key",
        "export CAIRN_API_KEY=cairn_Xq8vN2mL5pR7tW9yB3dF6hJ1kS4gZ0cV8nM2xQ5wE7r",
        "cairn_Xq8vN2mL5pR7tW9yB3dF6hJ1kS4gZ0cV8nM2xQ5wE7r",
    ),
    (
        "jwt",
        "token: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    (
        "url_password",
        "DATABASE_URL is postgres://billing:Tr0ub4dor-and-3@db.internal:5432/billing",
        "Tr0ub4dor-and-3",
    ),
    (
        "authorization",
        "curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0' https://api",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    ),
    (
        "secret_assignment",
        "DB_PASSWORD=correct-horse-battery-staple\nDEBUG=1",
        "correct-horse-battery-staple",
    ),
    ("secret_assignment", 'export STRIPE_SECRET="whisper-quietly-42"', "whisper-quietly-42"),
    (
        "secret_assignment",
        "then run: echo DB_PASS_TOKEN=plain-in-prose-77 >> .env",
        "plain-in-prose-77",
    ),
    (
        "secret_field",
        '{"client_id": "app", "client_secret": "gr8-s3cr3t-v4lue"}',
        "gr8-s3cr3t-v4lue",
    ),
    # formats that slipped through before (found by the capture attack review)
    ("secret_field", '{"password": "it\'s-a-s3cret"}', "s-a-s3cret"),
    ("secret_field", '{"password": "sh\\"h-qu1et-now"}', "h-qu1et-now"),
    ("secret_assignment", "DB_PASS=mule-b4ttery-h0rse", "mule-b4ttery-h0rse"),
    ("secret_assignment", "export GPG_PASSPHRASE='four w0rds in a row'", "four w0rds in a row"),
    ("url_password", "REDIS_URL=redis://:c4che-passw0rd@cache:6379/0", "c4che-passw0rd"),
    ("url_password", "HTTPS://deploy:Upp3r-case-sch3me@git.example.com", "Upp3r-case-sch3me"),
    (
        "azure_key",
        "DefaultEndpointsProtocol=https;AccountName=acct;"
        "AccountKey=Zm9vYmFyYmF6cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8=;"
        "EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8=",
    ),
    # names that say "key" or "password" only by a short word after a separator
    (
        "key_assignment",
        "RAILS_MASTER_KEY=9f2c1e4b7a8d6f3e0c5b2a1d4e7f8a9b",
        "9f2c1e4b7a8d6f3e0c5b2a1d4e7f8a9b",
    ),
    (
        "key_assignment",
        "APP_KEY=base64:Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo=",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo=",
    ),
    (
        "key_assignment",
        "users:\n- name: dev\n  user:\n    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVk=",
        "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVk=",
    ),
    ("password_assignment", "DB_PWD=Pwd4DbUser!", "Pwd4DbUser!"),
    ("password_assignment", "export MYSQL_PW='s3cr3t pass'", "s3cr3t pass"),
    (
        "docker_auth",
        '{"auths": {"ghcr.io": {"auth": "dXNlcjpET0NLRVJNQVJLRVJzZWNyZXQ="}}}',
        "dXNlcjpET0NLRVJNQVJLRVJzZWNyZXQ=",
    ),
    ("basic_auth_option", "curl -u admin:Curl4Pass99 https://api.example.com", "Curl4Pass99"),
    (
        "discord_webhook",
        "curl -X POST https://discord.com/api/webhooks/123456789/AbCdEfGhIjKlMnOpQrStUvWxYz",
        "AbCdEfGhIjKlMnOpQrStUvWxYz",
    ),
    (
        "telegram_bot_token",
        "BOT=1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw9",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw9",
    ),
    (
        "url_secret_param",
        "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sig=Zm9vYmFyJTJCYmF6%3D&se=2026",
        "Zm9vYmFyJTJCYmF6",
    ),
    # tokens glued to a word by a terminal colour code or a JSON escape
    (
        "github_token",
        "src/conf.py:\x1b[01;31m\x1b[Kghp_R2d2C3poBb8Luke4Leia5Han6Solo7Yoda8x\x1b[m\x1b[K",
        "ghp_R2d2C3poBb8Luke4Leia5Han6Solo7Yoda8x",
    ),
    (
        "github_token",
        'text: {"result": "Deploy notes:\\nghp_R2d2C3poBb8Luke4Leia5Han6Solo7Yoda8x"}',
        "ghp_R2d2C3poBb8Luke4Leia5Han6Solo7Yoda8x",
    ),
    (
        "aws_access_key",
        '{"stdout": "\\u001b[32mAKIAIOSFODNN7EXAMPLE\\u001b[0m"}',
        "AKIAIOSFODNN7EXAMPLE",
    ),
    (
        "aws_access_key",
        '{"env": "region=eu-west-1\\nAKIAIOSFODNN7EXAMPLE"}',
        "AKIAIOSFODNN7EXAMPLE",
    ),
    (
        "secret_assignment",
        '{"content": "DEBUG=1\\nDB_PASSWORD=hunter2hunter2"}',
        "hunter2hunter2",
    ),
    # a field's value of any length: AWS's session tokens run past a thousand characters
    (
        "secret_field",
        '"SessionToken": "IQoJb3JpZ2luX2VjEPr' + "Q" * 1200 + '"',
        "IQoJb3JpZ2luX2VjEPr" + "Q" * 1200,
    ),
)

# Ordinary text that looks a little like a secret and must come through unchanged.
HARMLESS = (
    "author: Alice <alice@example.com>",
    "PWD=/home/alice/project",
    "the model used 1500 tokens; max_tokens stays at 2000",
    "skip the ask-for-password step in the signup flow",
    "commit 3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e",
    "https://example.com/docs?page=2",
    # a model's settings: counts and kinds of tokens are no secrets
    "client.messages.create(max_tokens=4096, model=model)",
    "context_tokens = 1000",
    "tokenizer: gpt2\ntoken_type: bearer\ntoken_count: 12",
    "bypass=1 passthrough: yes",
    # keys and passwords of code, not credentials
    "rows.sort(key=lambda row: row[1]); id = Column(primary_key=True); sort_key=name",
    "OLDPWD=/home/alice\ncd $PWD && git push -u origin main",
    "https://example.com/search?key=a&sig=1",
)
