"""Config validation: every error names its field; file < flags; unknown keys refused."""

import os
import tempfile
import unittest

from plimsoll_placement import config

NOAUTH = {"auth": "none", "placement_endpoint": "http://127.0.0.1:8778"}


class ConfigTest(unittest.TestCase):
    def build(self, **flags):
        return config.build({}, flags)

    def test_bad_values_name_the_field(self):
        cases = [
            (dict(NOAUTH, interval="0s"), "interval"),
            (dict(NOAUTH, interval="10"), "interval"),
            (dict(NOAUTH, interval="10s", backoff_max="5s"), "backoff_max"),
            (dict(NOAUTH, timeout="1h"), "timeout"),
            (dict(NOAUTH, plimsolld="somewhere"), "plimsolld"),
            (dict(NOAUTH, plimsolld="h:7443"), "plimsolld_ca_file"),
            (dict(NOAUTH, plimsolld_ca_file="/ca.pem"), "plimsolld_ca_file"),
            ({"auth": "kerberos"}, "auth"),
            ({"auth": "none"}, "placement_endpoint"),
            (dict(NOAUTH, noauth_token=""), "noauth_token"),
            ({"auth": "password", "auth_url": "http://k:5000/v3", "username": "u", "password": "p"}, "project_name"),
            (dict(NOAUTH, placement_endpoint="127.0.0.1:8778"), "placement_endpoint"),
            (dict(NOAUTH, interface="private"), "interface"),
            (dict(NOAUTH, resource_provider_uuid="not-a-uuid"), "resource_provider_uuid"),
            (dict(NOAUTH, metrics_listen="9589"), "metrics_listen"),
        ]
        for flags, field in cases:
            with self.subTest(flags=flags):
                with self.assertRaises(config.ConfigError) as e:
                    self.build(**flags)
                self.assertTrue(str(e.exception).startswith(field), str(e.exception))

    def test_defaults_and_durations(self):
        c = self.build(**NOAUTH)
        self.assertEqual((c.interval, c.backoff_max, c.timeout), (30, 300, 10))
        self.assertTrue(c.resource_provider_name)  # this host's name
        self.assertEqual(self.build(interval="1500ms", **NOAUTH).interval, 1.5)

    def test_file_then_flags(self):
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
            f.write("[plimsoll_placement]\nauth = none\nplacement_endpoint = http://p:8778\ninterval = 10s\n"
                    "resource_provider_name = compute-7\n")
        try:
            c = config.build(config.read_file(f.name), {"interval": "5s"})
            self.assertEqual((c.interval, c.resource_provider_name, c.placement_endpoint), (5, "compute-7", "http://p:8778"))
        finally:
            os.unlink(f.name)

    def test_unknown_key_and_section(self):
        for text, word in (("[plimsoll_placement]\nintervall = 5s\n", "intervall"), ("[placement]\nauth = none\n", "[placement]")):
            with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
                f.write(text)
            try:
                with self.assertRaises(config.ConfigError) as e:
                    config.read_file(f.name)
                self.assertIn(word, str(e.exception))
            finally:
                os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
