"""Independent OAuth 2.0 / OpenID Connect client libraries (Authlib, requests-oauthlib) against
Sesame's OIDC emulator. Usage: oidc_clients.py ISSUER"""

import os
import re
import sys
import time
import urllib.parse
import warnings

import requests

# authlib.jose still works; its warning only points to joserfc.
warnings.filterwarnings("ignore", message="authlib.jose module is deprecated")
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from authlib.oidc.core import CodeIDToken
from requests_oauthlib import OAuth2Session as OAuthlibSession

from checklib import check, expect, run

ISSUER = sys.argv[1].rstrip("/")
REDIRECT = "http://127.0.0.1:9/callback"  # never followed: the checks read the Location header
ALICE, BOB = "248289761001", "248289761002"
os.environ["OAUTHLIB_INSECURE_TRANSPORT"] = "1"  # the emulator is plain HTTP on loopback

discovery = requests.get(ISSUER + "/.well-known/openid-configuration", timeout=10).json()
keys = JsonWebKey.import_key_set(requests.get(discovery["jwks_uri"], timeout=10).json())


def admin(path, body):
    answer = requests.post(ISSUER + "/__sesame/" + path, json=body, timeout=10)
    answer.raise_for_status()
    return answer.json()


def consent(url, user=ALICE):
    """The person on the emulator's consent page: choose who, allow; returns the redirect."""
    page = requests.get(url, allow_redirects=False, timeout=10)
    expect(page.status_code == 200, f"consent page: HTTP {page.status_code} {page.text[:200]}")
    request_id = re.search(r'name="request" value="([^"]+)"', page.text).group(1)
    answer = requests.post(
        ISSUER + "/authorize", data={"request": request_id, "action": "allow", "user": user},
        allow_redirects=False, timeout=10)
    expect(answer.status_code == 302, f"consent answer: HTTP {answer.status_code}")
    return answer.headers["Location"]


def redirect_parameters(location):
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))


def checked_claims(id_token, client_id, nonce=None, access_token=None):
    """Authlib's own ID-token checks, with zero leeway (its default)."""
    params = {"client_id": client_id}
    if nonce:
        params["nonce"] = nonce
    if access_token:
        params["access_token"] = access_token
    claims = jwt.decode(
        id_token, keys, claims_cls=CodeIDToken, claims_options={"iss": {"values": [ISSUER]}},
        claims_params=params)
    claims.validate(now=int(time.time()), leeway=0)
    return claims


def authlib_client(client_id, secret, method):
    return OAuth2Session(
        client_id, secret, scope="openid profile email", redirect_uri=REDIRECT, code_challenge_method="S256",
        token_endpoint_auth_method=method)


def authlib_login(client, client_id, user=ALICE):
    verifier, nonce = generate_token(48), generate_token(20)
    url, _ = client.create_authorization_url(
        discovery["authorization_endpoint"], code_verifier=verifier, nonce=nonce)
    token = client.fetch_token(
        discovery["token_endpoint"], authorization_response=consent(url, user), code_verifier=verifier)
    return token, checked_claims(token["id_token"], client_id, nonce, token["access_token"])


@check
def authlib_confidential_basic():
    """Authlib, confidential client, client_secret_basic: code + PKCE, ID token checked with zero leeway"""
    admin("clients", {"client_id": "authlib-basic", "client_secret": "authlib secret/+:"})
    token, claims = authlib_login(authlib_client("authlib-basic", "authlib secret/+:", "client_secret_basic"),
                                  "authlib-basic")
    expect(claims["sub"] == ALICE, f"sub {claims['sub']}")
    expect("auth_time" in claims and claims["azp"] == "authlib-basic", f"claims {dict(claims)}")


@check
def authlib_confidential_post():
    """Authlib, confidential client, client_secret_post"""
    admin("clients", {"client_id": "authlib-post", "client_secret": "post-secret"})
    token, _ = authlib_login(authlib_client("authlib-post", "post-secret", "client_secret_post"), "authlib-post")
    expect("refresh_token" in token, "a refresh token")


@check
def authlib_wrong_secret():
    """A wrong client secret over HTTP Basic is 401 invalid_client with a Basic challenge"""
    admin("clients", {"client_id": "authlib-wrong", "client_secret": "right"})
    answer = requests.post(discovery["token_endpoint"], data={"grant_type": "refresh_token", "refresh_token": "x"},
                           auth=("authlib-wrong", "wrong"), timeout=10)
    expect(answer.status_code == 401, f"HTTP {answer.status_code}")
    expect(answer.json().get("error") == "invalid_client", answer.text)
    expect(answer.headers.get("WWW-Authenticate", "").startswith("Basic"), str(answer.headers))


@check
def authlib_iat_never_in_future():
    """20 refreshed ID tokens: none has iat in the future (strict clients use zero leeway)"""
    client = authlib_client("sesame-desktop", None, "none")
    token, _ = authlib_login(client, "sesame-desktop")
    ahead = 0
    for _ in range(20):
        token = client.refresh_token(discovery["token_endpoint"], refresh_token=token["refresh_token"])
        claims = checked_claims(token["id_token"], "sesame-desktop", access_token=token["access_token"])
        ahead += claims["iat"] > time.time()
    expect(ahead == 0, f"{ahead} of 20 ID tokens were issued in the future")


@check
def authlib_narrowing_refresh_and_revocation():
    """Authlib: a refresh narrows the scope; revoking the refresh token revokes its access tokens"""
    client = authlib_client("sesame-desktop", None, "none")
    token, _ = authlib_login(client, "sesame-desktop")
    narrowed = client.refresh_token(discovery["token_endpoint"], refresh_token=token["refresh_token"],
                                    scope="openid")
    expect(narrowed["scope"] == "openid", f"scope {narrowed.get('scope')}")
    info = requests.get(discovery["userinfo_endpoint"],
                        headers={"Authorization": "Bearer " + narrowed["access_token"]}, timeout=10).json()
    expect("name" not in info, f"profile claims after narrowing: {info}")
    client.revoke_token(discovery["revocation_endpoint"], token=narrowed["refresh_token"],
                        token_type_hint="refresh_token")
    after = requests.get(discovery["userinfo_endpoint"],
                         headers={"Authorization": "Bearer " + narrowed["access_token"]}, timeout=10)
    expect(after.status_code == 401, f"access token after revoking its grant: HTTP {after.status_code}")


@check
def requests_oauthlib_public_pkce():
    """requests-oauthlib, public client with PKCE: login as Bob, userinfo, refresh"""
    session = OAuthlibSession("sesame-desktop", redirect_uri=REDIRECT, scope=["openid", "profile"], pkce="S256")
    url, _ = session.authorization_url(discovery["authorization_endpoint"])
    token = session.fetch_token(discovery["token_endpoint"], authorization_response=consent(url, BOB),
                                include_client_id=True)
    info = session.get(discovery["userinfo_endpoint"]).json()
    expect(info["sub"] == BOB and info["name"] == "Bob Example", f"userinfo {info}")
    refreshed = session.refresh_token(discovery["token_endpoint"], client_id="sesame-desktop")
    expect(refreshed["access_token"] != token["access_token"], "a new access token")


@check
def requests_oauthlib_confidential_basic():
    """requests-oauthlib, confidential client: its default HTTP Basic authentication"""
    admin("clients", {"client_id": "oauthlib-backend", "client_secret": "oauthlib-secret"})
    session = OAuthlibSession("oauthlib-backend", redirect_uri=REDIRECT, scope=["openid"], pkce="S256")
    url, _ = session.authorization_url(discovery["authorization_endpoint"])
    token = session.fetch_token(discovery["token_endpoint"], authorization_response=consent(url),
                                client_secret="oauthlib-secret")
    expect("id_token" in token, "an ID token")


@check
def prompt_none():
    """prompt=none redirects with login_required instead of showing a page"""
    query = {"response_type": "code", "client_id": "sesame-desktop", "redirect_uri": REDIRECT, "scope": "openid",
             "state": "xyz", "prompt": "none", "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
             "code_challenge_method": "S256"}
    answer = requests.get(discovery["authorization_endpoint"], params=query, allow_redirects=False, timeout=10)
    expect(answer.status_code == 302, f"HTTP {answer.status_code}")
    parameters = redirect_parameters(answer.headers["Location"])
    expect(parameters.get("error") == "login_required" and parameters.get("state") == "xyz", str(parameters))
    posted = requests.post(discovery["authorization_endpoint"], data={**query, "prompt": "consent"},
                           allow_redirects=False, timeout=10)
    expect(posted.status_code == 200 and 'name="request"' in posted.text, "a form-POSTed request gets the page")


@check
def device_flow_lenient_code():
    """Device flow: the code typed in lower case without its dash, approved as Bob"""
    start = requests.post(discovery["device_authorization_endpoint"],
                          data={"client_id": "sesame-desktop", "scope": "openid profile"}, timeout=10).json()
    prefilled = requests.get(start["verification_uri_complete"], timeout=10).text
    expect(f'value="{start["user_code"]}"' in prefilled, "verification_uri_complete prefills the code")
    typed = start["user_code"].replace("-", "").lower()
    page = requests.post(ISSUER + "/device", data={"user_code": typed, "user": BOB, "action": "allow"}, timeout=10)
    expect(page.status_code == 200, f"device page: HTTP {page.status_code}")
    token = requests.post(discovery["token_endpoint"], data={
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": start["device_code"],
        "client_id": "sesame-desktop"}, timeout=10).json()
    claims = checked_claims(token["id_token"], "sesame-desktop", access_token=token["access_token"])
    expect(claims["sub"] == BOB, f"sub {claims['sub']}")


@check
def bearer_forms_and_head():
    """userinfo: token in a form body; no token is a bare challenge; HEAD answers like GET"""
    client = authlib_client("sesame-desktop", None, "none")
    token, _ = authlib_login(client, "sesame-desktop")
    form = requests.post(discovery["userinfo_endpoint"], data={"access_token": token["access_token"]}, timeout=10)
    expect(form.status_code == 200 and form.json()["sub"] == ALICE, f"HTTP {form.status_code}")
    bare = requests.get(discovery["userinfo_endpoint"], timeout=10)
    challenge = bare.headers.get("WWW-Authenticate", "")
    expect(bare.status_code == 401 and challenge.startswith("Bearer") and "error=" not in challenge, challenge)
    head = requests.head(ISSUER + "/.well-known/openid-configuration", timeout=10)
    expect(head.status_code == 200 and head.content == b"", f"HEAD: HTTP {head.status_code}")
    expect({"auth_time", "azp", "at_hash"} <= set(discovery.get("claims_supported", [])), "claims_supported")


sys.exit(run("oidc-emulator"))
