"""plimsoll-placement's configuration: an INI file (one [plimsoll_placement] section, the way
OpenStack services are configured) and flags of the same names that override it, validated by
one function whose errors name the field. Unknown keys are errors."""

import argparse
import collections
import configparser
import re
import socket

SECTION = "plimsoll_placement"

# name -> (default, help). Durations are written 500ms, 30s, 5m, 1h.
OPTIONS = collections.OrderedDict([
    ("plimsolld", ("unix:/run/plimsoll/plimsolld.sock",
                   "plimsolld's control API: unix:/path, or host:port (mutual TLS: plimsolld_ca_file, _cert_file, "
                   "_key_file)")),
    ("plimsolld_ca_file", ("", "CA that signed plimsolld's certificate (host:port only)")),
    ("plimsolld_cert_file", ("", "client certificate (reader role is enough)")),
    ("plimsolld_key_file", ("", "its key")),
    ("resource_provider_name", ("", "the compute node resource provider; default: this host's name "
                                    "(nova names it after the hypervisor hostname)")),
    ("resource_provider_uuid", ("", "the provider's UUID, instead of looking it up by name")),
    ("auth", ("cloud", "cloud (keystone, clouds.yaml entry `cloud`), password (keystone, the options below) or "
                       "none (Placement's noauth2 at placement_endpoint: tests only)")),
    ("cloud", ("", "the clouds.yaml entry (auth = cloud); empty: OS_CLOUD or the OS_* environment")),
    ("auth_url", ("", "keystone URL (auth = password)")),
    ("username", ("", "keystone user (auth = password)")),
    ("password", ("", "its password (auth = password)")),
    ("project_name", ("", "keystone project (auth = password)")),
    ("user_domain_name", ("Default", "the user's domain (auth = password)")),
    ("project_domain_name", ("Default", "the project's domain (auth = password)")),
    ("region_name", ("", "region of the placement endpoint in the catalog")),
    ("interface", ("", "catalog interface: public, internal or admin; empty: the cloud's default")),
    ("placement_endpoint", ("", "Placement's URL, instead of the catalog's (required with auth = none)")),
    ("noauth_token", ("admin", "X-Auth-Token sent with auth = none (noauth2 makes \"admin\" an admin)")),
    ("interval", ("30s", "read the line and sync at most this often (1s .. 1h)")),
    ("backoff_max", ("5m", "failed syncs are retried after interval * 2^failures, at most this (>= interval)")),
    ("timeout", ("10s", "per request, to Placement and to plimsolld (100ms .. 5m)")),
    ("metrics_listen", ("127.0.0.1:9589", "Prometheus /metrics on host:port; empty: off")),
    ("stubs_dir", ("", "where the generated gRPC stubs are; default: gen/ beside the program")),
])

Config = collections.namedtuple("Config", list(OPTIONS.keys()))


class ConfigError(Exception):
    pass


def parse_duration(field, text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*", text or "")
    if not m:
        raise ConfigError("%s: %r is not a duration (500ms, 30s, 5m, 1h)" % (field, text))
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def add_flags(ap):
    """Adds --NAME for every option (unset: the file's value, else the default)."""
    for name, (default, help_text) in OPTIONS.items():
        ap.add_argument("--" + name, default=None, help="%s (default %r)" % (help_text, default))


def read_file(path):
    """The file's options as {name: text}. Unknown keys and sections are errors naming them."""
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    try:
        with open(path) as f:
            cp.read_file(f)
    except OSError as e:
        raise ConfigError("config %s: %s" % (path, e.strerror))
    except configparser.Error as e:
        raise ConfigError("config %s: %s" % (path, e))
    for section in cp.sections():
        if section != SECTION:
            raise ConfigError("config %s: unknown section [%s]; the options go in [%s]" % (path, section, SECTION))
    values = {}
    if cp.has_section(SECTION):
        for key, value in cp.items(SECTION):
            if key not in OPTIONS:
                raise ConfigError("config %s: [%s] %s: unknown option; options are: %s" %
                                  (path, SECTION, key, ", ".join(OPTIONS)))
            values[key] = value
    return values


def build(file_values, flag_values):
    """Merges defaults < file < flags, converts and validates. Durations become seconds."""
    raw = {name: default for name, (default, _) in OPTIONS.items()}
    raw.update(file_values)
    raw.update({k: v for k, v in flag_values.items() if v is not None and k in OPTIONS})
    return validate(raw)


def validate(raw):
    """A Config from option texts, or ConfigError naming the first bad field."""
    v = dict(raw)
    for field, lo, hi in (("interval", 1, 3600), ("backoff_max", 1, 86400), ("timeout", 0.1, 300)):
        v[field] = parse_duration(field, raw[field])
        if not lo <= v[field] <= hi:
            raise ConfigError("%s: %s is outside [%gs, %gs]" % (field, raw[field], lo, hi))
    if v["backoff_max"] < v["interval"]:
        raise ConfigError("backoff_max: %s is below interval %s" % (raw["backoff_max"], raw["interval"]))
    target = v["plimsolld"]
    tls = [f for f in ("plimsolld_ca_file", "plimsolld_cert_file", "plimsolld_key_file") if v[f]]
    if target.startswith("unix:"):
        if len(target) <= len("unix:"):
            raise ConfigError("plimsolld: %r has no socket path" % target)
        if tls:
            raise ConfigError("%s: TLS files are for a host:port plimsolld, not %s" % (tls[0], target))
    else:
        if not re.fullmatch(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}", target):
            raise ConfigError("plimsolld: %r is neither unix:/path nor host:port" % target)
        if len(tls) != 3:
            raise ConfigError("plimsolld_ca_file, plimsolld_cert_file, plimsolld_key_file: a host:port plimsolld "
                              "serves only mutual TLS; set all three")
    if v["auth"] not in ("cloud", "password", "none"):
        raise ConfigError("auth: %r is not one of cloud, password, none" % v["auth"])
    if v["auth"] == "none":
        if not v["placement_endpoint"]:
            raise ConfigError("placement_endpoint: required with auth = none (no catalog to find Placement in)")
        if not v["noauth_token"]:
            raise ConfigError("noauth_token: required with auth = none (Placement's noauth2 needs X-Auth-Token)")
    if v["auth"] == "password":
        for f in ("auth_url", "username", "password", "project_name"):
            if not v[f]:
                raise ConfigError("%s: required with auth = password" % f)
    if v["placement_endpoint"] and not re.match(r"https?://", v["placement_endpoint"]):
        raise ConfigError("placement_endpoint: %r is not an http(s) URL" % v["placement_endpoint"])
    if v["interface"] not in ("", "public", "internal", "admin"):
        raise ConfigError("interface: %r is not one of public, internal, admin" % v["interface"])
    if v["resource_provider_uuid"] and not re.fullmatch(
            r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}",
            v["resource_provider_uuid"]):
        raise ConfigError("resource_provider_uuid: %r is not a UUID" % v["resource_provider_uuid"])
    if not v["resource_provider_name"] and not v["resource_provider_uuid"]:
        v["resource_provider_name"] = socket.gethostname()
    if v["metrics_listen"] and not re.fullmatch(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]*):\d{1,5}", v["metrics_listen"]):
        raise ConfigError("metrics_listen: %r is not host:port" % v["metrics_listen"])
    return Config(**v)


def describe(cfg):
    """The effective configuration as INI text (the password hidden)."""
    lines = ["[%s]" % SECTION]
    for name in OPTIONS:
        value = getattr(cfg, name)
        if name == "password" and value:
            value = "(set)"
        if isinstance(value, float):
            value = "%gs" % value
        lines.append("%s = %s" % (name, value))
    return "\n".join(lines)


def parser():
    ap = argparse.ArgumentParser(
        prog="plimsoll-placement",
        description="Keeps this host's MEMORY_MB inventory in OpenStack Placement at what plimsolld's "
                    "Plimsoll line offers (docs/placement.md).")
    ap.add_argument("--config", help="INI file with a [%s] section" % SECTION)
    ap.add_argument("--check_config", action="store_true", help="validate, print the effective config, exit")
    ap.add_argument("--once", action="store_true",
                    help="one sync, then exit: 0 synced, 1 failed (the reason printed), 3 no usable line")
    add_flags(ap)
    return ap
