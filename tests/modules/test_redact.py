"""PII redaction: each kind, the IPv4/version rule, counts per kind in the manifest."""

import json

import dask.dataframe as dd
import pandas as pd
import pytest

from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.redact import RedactSettings, RedactStage, is_secret_token, redact
from tests.conftest import read_output, run_stage, write_jsonl

IP = "<redacted-network-address>"


def one(text, **settings):
    out = redact(pd.DataFrame({"id": ["x"], "text": [text]}).astype(STRING), RedactSettings(**settings))
    counts = {c[len("_pii_"):]: int(out[c].iloc[0]) for c in out.columns if c.startswith("_pii_")}
    return out["text"].iloc[0], {k: v for k, v in counts.items() if v}


def test_emails():
    assert one("Write to jane.doe+x@mail.example.co.uk.") == ("Write to <redacted-email>.", {"email": 1})
    # a crate version is not an address: the top-level domain must be letters
    assert one("cargo add rand@0.8.5 trpl@0.2.0") == ("cargo add rand@0.8.5 trpl@0.2.0", {})


@pytest.mark.parametrize("text,expected", [
    ("ping 1.2.3.4 now", f"ping {IP} now"),
    ("host=93.184.216.34:80", f"host={IP}:80"),
    ("at 8.8.8.8.", f"at {IP}."),
    # the version rule
    ("version 1.2.3.4", "version 1.2.3.4"),
    ("Version: 1.2.3.4", "Version: 1.2.3.4"),
    ("v1.2.3.4 and V1.2.3.4", "v1.2.3.4 and V1.2.3.4"),
    ("release 2.0.0.1", "release 2.0.0.1"),
    ("pkg==1.2.3.4 pkg>=1.2.3.4 pkg@1.2.3.4 ^1.2.3.4", "pkg==1.2.3.4 pkg>=1.2.3.4 pkg@1.2.3.4 ^1.2.3.4"),
    ("1.2.3.4-beta and 1.2.3.4+build7", "1.2.3.4-beta and 1.2.3.4+build7"),
    ("OID 1.2.3.4.5.6", "OID 1.2.3.4.5.6"),
    ("see section 4.1.2.3", "see section 4.1.2.3"),
    ("999.1.1.1 is no address", "999.1.1.1 is no address"),
    # private, loopback and documentation addresses are addresses too (keep_non_public_ips keeps them)
    ("lan 192.168.1.10, 10.0.0.1, doc 203.0.113.5", f"lan {IP}, {IP}, doc {IP}"),
    # IPv6
    ("dns 2a00:1450:4001:80b::200e ok", f"dns {IP} ok"),
    ("::1 fe80::1 2001:db8::1", f"{IP} {IP} {IP}"),
    ("std::io::Result and Self::Err at 12:30:45, mac 00:1A:2B:3C:4D:5E",
     "std::io::Result and Self::Err at 12:30:45, mac 00:1A:2B:3C:4D:5E"),
])
def test_network_addresses(text, expected):
    assert one(text)[0] == expected


def test_non_public_addresses_kept_when_asked():
    text = "bind 127.0.0.1:7878 or 0.0.0.0, lan 192.168.1.10, 10.0.0.1, doc 203.0.113.5, ::1 fe80::1 2001:db8::1"
    assert one(text, keep_non_public_ips=True)[0] == text
    redacted, counts = one("127.0.0.1 and ::1 and 8.8.8.8", keep_non_public_ips=True)
    assert redacted == f"127.0.0.1 and ::1 and {IP}" and counts == {"network_address": 1}


@pytest.mark.parametrize("text,expected", [
    ("key AKIAIOSFODNN7EXAMPLE.", "key API_KEY_REDACTED."),
    ("ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", "API_KEY_REDACTED"),
    ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "API_KEY_REDACTED"),
    ("xoxb-123456789012-abcdefghij", "API_KEY_REDACTED"),
    ("api_key = 'sk_live_abcdefgh12345678'", "api_key = 'API_KEY_REDACTED'"),
    ('"password": "correct horse"', '"password": "correct horse"'),  # a space: not a value we recognise
    ('PASSWORD="hunter2hunter2"', 'PASSWORD="API_KEY_REDACTED"'),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "API_KEY_REDACTED"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "API_KEY_REDACTED"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\nok",
     "API_KEY_REDACTED\nok"),
    ("token aB3dE5fG7hJ9kL1mN3pQ5rS7tU9 here", "token API_KEY_REDACTED here"),
    ("getUserAccountSettings2 ThisIsAVeryLongVariableName1 x86_64-unknown-linux-gnu",
     "getUserAccountSettings2 ThisIsAVeryLongVariableName1 x86_64-unknown-linux-gnu"),
    ("commit 9fceb02d0ae598e95dc970b74767f19372d61af8", "commit 9fceb02d0ae598e95dc970b74767f19372d61af8"),
])
def test_secrets(text, expected):
    assert one(text)[0] == expected


def test_secret_counted_once():
    assert one("api_key = 'AKIAIOSFODNN7EXAMPLE'")[1] == {"secret": 1}


def test_high_entropy_rule():
    s = RedactSettings()
    assert is_secret_token("aB3dE5fG7hJ9kL1mN3pQ5rS7tU9", s)
    assert not is_secret_token("aB3dE5fG7hJ9kL1mN3p", s)  # 19 characters
    assert not is_secret_token("abcdefghijklmnopqrstuvwxyz0123", s)  # no upper case
    assert not is_secret_token("AbstractSingletonProxyFactoryBean2", s)  # word-like


@pytest.mark.parametrize("text,expected", [
    ("cd /home/alice/projects", "cd <redacted-path>/projects"),
    ("in /Users/bob", "in <redacted-path>"),  # no separator invented
    ("/home/alice", "<redacted-path>"),
    ("/home/alice/", "<redacted-path>/"),
    ("see https://example.com/home/about", "see https://example.com/home/about"),  # a URL path, not a home
    ("http://host/Users/bob/x and /srv/home/alice/x", "http://host/Users/bob/x and /srv/home/alice/x"),
    ("PATH=/home/alice/bin:/home/alice/.local/bin", "PATH=<redacted-path>/bin:<redacted-path>/.local/bin"),
    ("'/home/a' \"/home/b\" (/home/c) `/Users/d`", "'<redacted-path>' \"<redacted-path>\" (<redacted-path>) `<redacted-path>`"),
    ("x\n/home/alice\ty /home/bob.", "x\n<redacted-path>\ty <redacted-path>."),
    ("file:///home/alice/x.txt", "file://<redacted-path>/x.txt"),
    ("at file:///home/.rustup/toolchains", "at file:///home/.rustup/toolchains"),  # no user name there
    ("C:\\Users\\carol\\Documents", "C:\\Users\\carol\\Documents".replace("C:\\Users\\carol\\", "<redacted-path>\\")),
    ('"C:\\\\Users\\\\dave\\\\x"', '"<redacted-path>\\\\x"'),
    ("/homework/alice", "/homework/alice"),
])
def test_home_paths(text, expected):
    assert one(text)[0] == expected


def test_each_kind_can_be_switched_off():
    text = "a@b.org 1.2.3.4 AKIAIOSFODNN7EXAMPLE /home/eve/x"
    assert one(text, emails=False, network_addresses=False, secrets=False, home_paths=False) == (text, {})
    assert one(text)[1] == {"email": 1, "network_address": 1, "secret": 1, "home_path": 1}


def test_empty_whitespace_and_huge():
    assert one("") == ("", {}) and one("  \n ") == ("  \n ", {})
    big = ("word 1.2.3.4 text " * 100_000)
    text, counts = one(big)
    assert counts == {"network_address": 100_000} and IP in text


def test_validation():
    with pytest.raises(SettingsError, match="secret_min_length"):
        RedactSettings(secret_min_length=3)


def test_dask_equals_pandas():
    texts = ["mail a@b.org", "ip 1.2.3.4", "nothing", "", "v1.2.3.4"]
    frame = pd.DataFrame({"id": list("abcde"), "text": texts}).astype(STRING)
    got = RedactStage().apply(dd.from_pandas(frame, npartitions=2), RedactSettings()).compute()
    pd.testing.assert_frame_equal(got, redact(frame, RedactSettings()))


def test_stage_manifest_counts_and_single_pass(tmp_path, monkeypatch):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "text": "mail jane@example.com and joe@example.org"},
                                       {"id": "2", "text": "server 1.2.3.4, version 1.2.3.4"}])
    write_jsonl(tmp_path / "b.jsonl", [{"id": "3", "text": "key AKIAIOSFODNN7EXAMPLE in /home/eve/.aws"},
                                       {"id": "4", "text": "nothing to see"}])
    calls = []
    original = RedactStage.transform

    def counting(self, df, settings):
        calls.append(len(df))
        return original(self, df, settings)

    monkeypatch.setattr(RedactStage, "transform", counting)
    m = run_stage("redact", {}, str(tmp_path / "*.jsonl"), tmp_path / "out")
    assert m["redacted"] == {"secret": 1, "email": 2, "network_address": 1, "home_path": 1, "documents": 3}
    assert json.load(open(tmp_path / "out" / "_manifest.json"))["redacted"] == m["redacted"]
    assert m["counts"] == {"in": 4, "out": 4, "dropped": {}}
    assert sorted(n for n in calls if n) == [2, 2]  # each partition redacted once, not once more for counts
    out = read_output(tmp_path / "out")
    assert list(out.columns) == ["id", "text"]
    assert out["text"].tolist()[:3] == [
        "mail <redacted-email> and <redacted-email>", f"server {IP}, version 1.2.3.4",
        "key API_KEY_REDACTED in <redacted-path>/.aws"]


# --------------------------------------------------------------------------- Presidio (pii extra)

# test numbers: a Visa test card (Luhn-valid) and one digit off; the ECBS example IBAN and one digit off
CARD, BAD_CARD = "4111 1111 1111 1111", "4111 1111 1111 1112"
IBAN, BAD_IBAN = "GB82 WEST 1234 5698 7654 32", "GB82 WEST 1234 5698 7654 33"
PII_TEXT = (f"Call (212) 555-0198 or +44 20 7946 0958. Card {CARD}, not {BAD_CARD}. "
            f"IBAN {IBAN}, not {BAD_IBAN}. Mail jane@example.com")


@pytest.fixture(scope="module")
def presidio_ready():
    pytest.importorskip("presidio_analyzer", reason="presidio-analyzer is the optional pii extra")
    pytest.importorskip("spacy", reason="spacy comes with the optional pii extra")


def test_presidio_pattern_recognisers_offline(presidio_ready):
    # oracles: phonenumbers itself for the phones, a hand-written Luhn check for the cards
    import phonenumbers

    found = [m.raw_string for m in phonenumbers.PhoneNumberMatcher(PII_TEXT, "US")]
    assert found == ["(212) 555-0198", "+44 20 7946 0958"]

    def luhn(number):
        digits = [int(c) for c in number if c.isdigit()][::-1]
        return sum(d if i % 2 == 0 else (2 * d - 9 if d > 4 else 2 * d) for i, d in enumerate(digits)) % 10 == 0

    assert luhn(CARD) and not luhn(BAD_CARD)
    s = RedactSettings(presidio=("default",))
    assert "PHONE_NUMBER" in s.presidio and "CREDIT_CARD" in s.presidio  # 'default' expanded on the client
    frame = pd.DataFrame({"id": ["a", "b"], "text": [PII_TEXT, "nothing here"]}).astype(STRING)
    out = redact(frame, s)
    assert out["text"].iloc[0] == (
        "Call <redacted-phone> or <redacted-phone>. Card <redacted-credit-card>, not " + BAD_CARD + ". "
        "IBAN <redacted-iban>, not " + BAD_IBAN + ". Mail <redacted-email>")  # e-mail: still the fast path
    assert out["_pii_phone_number"].tolist() == [2, 0] and out["_pii_credit_card"].tolist() == [1, 0]
    assert out["_pii_iban_code"].tolist() == [1, 0] and out["_pii_email"].tolist() == [1, 0]


def test_presidio_strategies_and_manifest(presidio_ready, tmp_path, monkeypatch):
    frame = pd.DataFrame({"id": ["a"], "text": [f"{CARD} and {CARD}"]}).astype(STRING)
    replaced = redact(frame, RedactSettings(presidio=("CREDIT_CARD",), strategy="replace", replace_token="[X]"))
    assert replaced["text"].iloc[0] == "[X] and [X]"
    monkeypatch.setenv("CURATE_TEST_SALT", "pepper")
    hashed = redact(frame, RedactSettings(presidio=("CREDIT_CARD",), strategy="hash", hash_salt_env="CURATE_TEST_SALT"))
    import hashlib

    digest = hashlib.sha256(b"pepper" + CARD.encode()).hexdigest()[:16]
    assert hashed["text"].iloc[0] == f"<credit-card-{digest}> and <credit-card-{digest}>"  # equal values stay equal
    write_jsonl(tmp_path / "in.jsonl", [{"id": "1", "text": PII_TEXT}, {"id": "2", "text": "none"}])
    m = run_stage("redact", {"presidio": ["PHONE_NUMBER", "IBAN_CODE"]}, tmp_path / "in.jsonl", tmp_path / "o")
    assert m["redacted"]["phone_number"] == 2 and m["redacted"]["iban_code"] == 1 and m["redacted"]["documents"] == 1
    assert "pepper" not in (tmp_path / "o" / "_manifest.json").read_text()


def test_presidio_settings_errors(presidio_ready, tmp_path):
    with pytest.raises(SettingsError, match="unknown entity 'PERSONS'"):
        RedactSettings(presidio=("PERSONS",))
    with pytest.raises(SettingsError, match="spacy_model"):
        RedactSettings(presidio=("PERSON",), spacy_model=str(tmp_path / "missing"))
