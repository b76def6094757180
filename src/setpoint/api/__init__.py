"""The Kubernetes-compatible HTTP API: kubectl and the Kubernetes client libraries work
against a setpoint store through it.

    from setpoint.api.app import create_app
    from setpoint.api.server import ApiServer

    app = create_app(store, auth=Authenticator.from_file("tokens.csv"))
    async with ApiServer(app, "127.0.0.1", 8080):
        ...

Modules: `app` (routing, authentication, errors as Status), `browser_safety` (the Host,
Origin and content-type rules every request passes first), `resources` (CRUD, status,
scale, lists), `watch` (streams with bounded buffers), `discovery`, `status`, `auth`
(tokens, roles by kind and verb), `query` (paths, selectors, paging), `server` (uvicorn
and its limits), `serving` (what `setpoint serve` and `setpoint up` run: tokens, roles,
bind check, Host names, TLS, kubeconfig), `tls`, `kubeconfig`. `openapi` and `tables`
build the OpenAPI documents and `kubectl get`'s tables.
This package sits beside the CLI: it uses the store, the model and the runtime, and
nothing imports it but the CLI.
"""
