"""An OAuth 2.0 authorization server for machines, built from Authlib's server parts: the client
credentials grant (RFC 6749 section 4.4) with private_key_jwt client authentication (RFC 7523),
nothing of Sesame's. scripts/interop starts it and Sesame's IndependentMachineServerTests log in
to it.

    python machine_server.py --port PORT

GET  /.well-known/openid-configuration   discovery (token endpoint, private_key_jwt only)
POST /token                              Authlib's token endpoint
POST /__register {"client_id", "jwk"}     registers a client by its public key (test set-up)
GET  /__grants?client_id=ID              {"grants": N}: the grants made to a client
"""

import argparse
import threading

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin
from authlib.oauth2.rfc6749.grants import ClientCredentialsGrant
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion
from flask import Flask, jsonify, request
from joserfc.jwk import import_key

app = Flask(__name__)
app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {"client_credentials": 40}
lock = threading.Lock()
clients = {}
used_jti = set()
grants = {}


class Client(ClientMixin):
    def __init__(self, client_id, jwk):
        self.client_id = client_id
        self.jwk = jwk

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        return scope or "api"

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        return False

    def check_endpoint_auth_method(self, method, endpoint):
        return method == "private_key_jwt"

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return grant_type == "client_credentials"


def base():
    return request.host_url.rstrip("/")


class PrivateKeyJWT(JWTBearerClientAssertion):
    CLIENT_AUTH_METHOD = "private_key_jwt"

    def get_audiences(self):
        return [base() + "/token", base()]

    def validate_jti(self, claims, jti):
        with lock:
            if jti in used_jti:
                return False
            used_jti.add(jti)
            return True

    def resolve_client_public_key(self, client):
        return import_key(client.jwk)


def save_token(token, request):
    with lock:
        client_id = request.client.get_client_id()
        grants[client_id] = grants.get(client_id, 0) + 1


server = AuthorizationServer(app, query_client=lambda client_id: clients.get(client_id), save_token=save_token)
server.register_client_auth_method(PrivateKeyJWT.CLIENT_AUTH_METHOD, PrivateKeyJWT())


class MachineGrant(ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["private_key_jwt"]


server.register_grant(MachineGrant)


@app.get("/.well-known/openid-configuration")
def discovery():
    return jsonify(
        issuer=base(),
        authorization_endpoint=base() + "/authorize",
        token_endpoint=base() + "/token",
        grant_types_supported=["client_credentials"],
        token_endpoint_auth_methods_supported=["private_key_jwt"],
        token_endpoint_auth_signing_alg_values_supported=["RS256", "ES256"],
    )


@app.post("/token")
def token():
    return server.create_token_response()


@app.post("/__register")
def register():
    body = request.get_json()
    with lock:
        clients[body["client_id"]] = Client(body["client_id"], body["jwk"])
    return jsonify(registered=body["client_id"])


@app.get("/__grants")
def counted():
    with lock:
        return jsonify(grants=grants.get(request.args.get("client_id"), 0))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    app.run(host="127.0.0.1", port=arguments.port, threaded=True)
