"""An independent Graph API client library (facebook-sdk) against Sesame's Facebook emulator.
Usage: graph_clients.py BASE_URL"""

import re
import sys

import facebook
import requests

from checklib import check, expect, run

BASE = sys.argv[1].rstrip("/")
facebook.FACEBOOK_GRAPH_URL = BASE + "/"  # the library's one switch for its server

app = requests.get(BASE + "/__sesame/apps", timeout=10).json()["data"][0]
login = requests.post(BASE + "/__sesame/tokens", json={"permissions": ["email", "publish_actions", "user_posts"]},
                      timeout=10).json()
TOKEN, USER = login["access_token"], login["user_id"]
versions = []


def graph(token=TOKEN):
    session = requests.Session()
    session.hooks["response"].append(lambda response, *args, **kwargs: versions.append(
        response.headers.get("facebook-api-version")))
    return facebook.GraphAPI(access_token=token, version="3.1", session=session)


@check
def objects():
    """get_object, and get_objects (GET /?ids=a,b)"""
    me = graph().get_object("me", fields="id,name,email")
    expect(me["id"] == USER and "email" in me, str(me))
    both = graph().get_objects([USER, "me"], fields="id,name")
    expect(set(both) == {USER, "me"} and both["me"]["id"] == USER, str(both))
    url = requests.get(BASE + "/v3.1/", params={"id": "https://example.com/", "access_token": TOKEN}, timeout=10)
    expect(url.status_code == 200 and url.json()["id"] == "https://example.com/", url.text)


@check
def served_version():
    """facebook-api-version names the version that answered: an ended one is served by a newer one"""
    versions.clear()
    graph().get_object("me")
    expect(len(versions) == 1 and re.fullmatch(r"v\d+\.\d+", versions[0] or "") and versions[0] != "v3.1",
           f"headers {versions}")
    old = requests.get(BASE + "/v18.0/me", params={"access_token": TOKEN}, timeout=10)
    expect(old.headers.get("facebook-api-version") == versions[0], str(old.headers))


@check
def feed_and_paging():
    """put_object, get_connections with limit, get_all_connections following paging"""
    for number in range(3):
        posted = graph().put_object("me", "feed", message=f"from facebook-sdk {number}")
        expect("id" in posted, str(posted))
    page = graph().get_connections("me", "feed", limit=1)
    expect(len(page["data"]) == 1 and "next" in page.get("paging", {}), str(page))
    every = list(graph().get_all_connections("me", "feed"))
    expect(len(every) >= 3, f"{len(every)} posts")


@check
def field_expansion():
    """picture{url} answers only the url; feed.limit(1){message} one post"""
    me = graph().get_object("me", fields="picture{url},feed.limit(1){message}")
    expect(list(me["picture"]["data"]) == ["url"], str(me["picture"]))
    expect(len(me["feed"]["data"]) == 1 and set(me["feed"]["data"][0]) <= {"message", "id"}, str(me["feed"]))


@check
def app_token_permissions_debug():
    """get_app_access_token, get_permissions, debug_access_token"""
    app_token = graph(None).get_app_access_token(app["id"], app["secret"], offline=False)
    expect(isinstance(app_token, str) and app_token, "an app token")
    permissions = graph().get_permissions(USER)
    expect({"email", "publish_actions"} <= permissions, str(permissions))
    debug = graph(app_token).debug_access_token(TOKEN, app["id"], app["secret"])
    expect(debug["data"]["is_valid"] and debug["data"]["user_id"] == USER, str(debug))


@check
def errors():
    """a refused token is GraphAPIError 190; suppress_http_code=1 answers 200 with the envelope"""
    try:
        graph("not-a-token").get_object("me")
    except facebook.GraphAPIError as error:
        expect(error.code == 190 and error.type == "OAuthException", f"{error.code} {error.type}")
    else:
        raise AssertionError("no GraphAPIError")
    suppressed = requests.get(BASE + "/me", params={"access_token": "bad", "suppress_http_code": "1"}, timeout=10)
    expect(suppressed.status_code == 200 and suppressed.json()["error"]["code"] == 190, suppressed.text)


sys.exit(run("facebook-emulator"))
