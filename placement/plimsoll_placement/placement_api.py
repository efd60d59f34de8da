"""The Placement seam: the few REST calls plimsoll-placement makes, over a keystoneauth1
Adapter (from openstacksdk's clouds.yaml, keystone options, or a plain session for Placement's
noauth2 mode). Every failure becomes a PlacementError with a `reason` (the metric's label) and a
message that says what to fix.

Placement facts relied on (placement 8.0, microversion 1.26): inventory PUT replaces the whole
record, so every field read is sent back; the PUT carries the provider's generation and answers
409 when another writer (nova-compute, an allocation) moved it; at 1.26 a capacity of 0 is
accepted; Placement itself lets capacity fall below usage (with a warning), so the caller must
not ask for it.
"""

import json

MICROVERSION = "1.26"
MEMORY = "MEMORY_MB"


class PlacementError(Exception):
    """A failed call. reason: "unreachable", "auth", "forbidden", "conflict",
    "provider_not_found", "bad_response", "http_<code>"."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


class Placement:
    """Placement's REST API for one provider class (MEMORY_MB). Not thread-safe: one sync
    loop owns it.

    adapter: a keystoneauth1 Adapter (or anything with .request(url, method, json=...,
    raise_exc=False, microversion=...) returning a requests-like response), or a function
    making one, called at the first request (openstacksdk authenticates when it makes its
    Placement proxy: keystone down or refusing at start is then a counted, retried failure).
    auth_hint: what to fix when the credentials are refused (names the clouds.yaml entry or
    the options); authenticated: False in noauth mode (the token is a plain header)."""

    def __init__(self, adapter, auth_hint, authenticated=True, timeout=10.0):
        self._adapter = adapter
        self.auth_hint = auth_hint
        self.authenticated = authenticated
        self.timeout = timeout

    def _call(self, method, url, body=None):
        try:
            from keystoneauth1 import exceptions as ksa_exc
        except ImportError:  # a fake adapter in the unit tests
            ksa_exc = None
        kwargs = dict(raise_exc=False, microversion=MICROVERSION, timeout=self.timeout)
        if body is not None:
            kwargs["json"] = body
        if not self.authenticated:
            kwargs["authenticated"] = False
        try:
            if callable(self._adapter) and not hasattr(self._adapter, "request"):
                self._adapter = self._adapter()
            r = self._adapter.request(url, method, **kwargs)
        except Exception as e:  # keystoneauth raises for auth and transport failures
            if ksa_exc is not None and isinstance(e, (ksa_exc.Unauthorized, ksa_exc.AuthorizationFailure,
                                                      ksa_exc.MissingAuthPlugin, ksa_exc.MissingRequiredOptions)):
                raise PlacementError("auth", "keystone refused the credentials: %s (%s)" % (self.auth_hint, e))
            if ksa_exc is not None and isinstance(e, ksa_exc.EndpointNotFound):
                raise PlacementError("unreachable", "no placement endpoint in the service catalog: %s; or set "
                                     "placement_endpoint (%s)" % (self.auth_hint, e))
            raise PlacementError("unreachable", "%s %s: %s" % (method, url, e))
        if r.status_code == 401:
            raise PlacementError("auth", "Placement answered 401 to %s %s: %s" % (method, url, self.auth_hint))
        if r.status_code == 403:
            raise PlacementError("forbidden", "Placement answered 403 to %s %s: the credentials lack the admin "
                                 "role Placement requires to change inventories (%s)" % (method, url, self.auth_hint))
        if r.status_code == 409:
            raise PlacementError("conflict", "%s %s: 409 %s" % (method, url, _short(r.text)))
        if r.status_code >= 300:
            raise PlacementError("http_%d" % r.status_code, "%s %s: %d %s" % (method, url, r.status_code,
                                                                           _short(r.text)))
        try:
            return r.json() if r.text else {}
        except ValueError:
            raise PlacementError("bad_response", "%s %s: not JSON: %s" % (method, url, _short(r.text)))

    def provider_uuid(self, name):
        """The UUID of the provider named `name` (nova's compute node provider is named after
        the hypervisor hostname)."""
        body = self._call("GET", "/resource_providers?name=" + _quote(name))
        rps = body.get("resource_providers", [])
        if not rps:
            raise PlacementError("provider_not_found", "Placement has no resource provider named %r: set "
                                 "resource_provider_name to the hypervisor hostname nova-compute registered "
                                 "(`openstack resource provider list`), or resource_provider_uuid" % name)
        return rps[0]["uuid"]

    def memory_allocations(self, rp):
        """{consumer uuid: MEMORY_MB} allocated on the provider."""
        body = self._call("GET", "/resource_providers/%s/allocations" % rp)
        out = {}
        for consumer, a in body.get("allocations", {}).items():
            mb = a.get("resources", {}).get(MEMORY, 0)
            if mb:
                out[consumer] = int(mb)
        return out

    def memory_inventory(self, rp):
        """(generation, {total, reserved, min_unit, max_unit, step_size, allocation_ratio} or None)."""
        body = self._call("GET", "/resource_providers/%s/inventories" % rp)
        try:
            return int(body["resource_provider_generation"]), body.get("inventories", {}).get(MEMORY)
        except (KeyError, TypeError, ValueError):
            raise PlacementError("bad_response", "GET inventories of %s: no generation in %s" % (rp, _short(body)))

    def put_memory_inventory(self, rp, generation, record):
        """Replaces the MEMORY_MB record (all fields given) if the provider is still at
        `generation`; PlacementError("conflict") otherwise."""
        body = dict(record)
        body["resource_provider_generation"] = generation
        return self._call("PUT", "/resource_providers/%s/inventories/%s" % (rp, MEMORY), body)


def _quote(s):
    import urllib.parse
    return urllib.parse.quote(s, safe="")


def _short(body, limit=300):
    text = body if isinstance(body, str) else json.dumps(body)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def connect(cfg):
    """A Placement for the configuration: auth = cloud (clouds.yaml entry `cloud` through
    openstacksdk), password (keystone options), or none (Placement's noauth2 at
    placement_endpoint, with the token noauth_token). Raises PlacementError("auth") with what to
    fix when the cloud entry cannot be loaded."""
    if cfg.auth == "none":
        from keystoneauth1 import adapter, session
        a = adapter.Adapter(session=session.Session(), service_type="placement",
                            endpoint_override=cfg.placement_endpoint,
                            additional_headers={"X-Auth-Token": cfg.noauth_token})
        return Placement(a, "Placement's noauth2 mode gives the admin role to the token \"admin\": set "
                         "noauth_token (now %r)" % cfg.noauth_token, authenticated=False, timeout=cfg.timeout)
    import openstack
    import openstack.exceptions
    kwargs = {}
    if cfg.region_name:
        kwargs["region_name"] = cfg.region_name
    if cfg.interface:
        kwargs["interface"] = cfg.interface
    if cfg.placement_endpoint:
        kwargs["placement_endpoint_override"] = cfg.placement_endpoint
    if cfg.auth == "cloud":
        where = _clouds_yaml_files()
        hint = ("fix the auth section (auth_url, username, password, project_name, user_domain_name, "
                "project_domain_name, or the application credential) of the cloud %r in clouds.yaml (%s)" %
                (cfg.cloud, where))
        try:
            conn = openstack.connect(cloud=cfg.cloud, **kwargs)
        except openstack.exceptions.ConfigException as e:
            raise PlacementError("auth", "cannot load the cloud %r from clouds.yaml (%s): %s; set the option "
                                 "`cloud` to an entry there" % (cfg.cloud, where, e))
    else:
        hint = ("fix the options auth_url (%s), username (%s), password, project_name (%s), user_domain_name, "
                "project_domain_name" % (cfg.auth_url, cfg.username, cfg.project_name))
        try:
            conn = openstack.connect(auth_url=cfg.auth_url, username=cfg.username, password=cfg.password,
                                     project_name=cfg.project_name, user_domain_name=cfg.user_domain_name,
                                     project_domain_name=cfg.project_domain_name, load_yaml_config=False,
                                     load_envvars=False, **kwargs)
        except openstack.exceptions.ConfigException as e:
            raise PlacementError("auth", "keystone options incomplete: %s: %s" % (e, hint))
    return Placement(lambda: conn.placement, hint, authenticated=True, timeout=cfg.timeout)


def _clouds_yaml_files():
    """The clouds.yaml files openstacksdk reads: those that exist, else where it looks."""
    import os
    try:
        from openstack.config import loader
        files = list(dict.fromkeys(loader.CONFIG_FILES))
    except Exception:  # an openstacksdk without the list: name the usual places
        files = ["clouds.yaml", os.path.expanduser("~/.config/openstack/clouds.yaml"), "/etc/openstack/clouds.yaml"]
    if os.environ.get("OS_CLIENT_CONFIG_FILE"):
        files.insert(0, os.environ["OS_CLIENT_CONFIG_FILE"])
    there = [f for f in files if os.path.exists(f)]
    return ", ".join(there) if there else "none found; looked at " + ", ".join(f for f in files if f.endswith(".yaml"))
