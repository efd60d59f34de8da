"""The Placement seam's error mapping over a fake adapter: every failure has a reason and says
what to fix; nothing raises past it but PlacementError."""

import json
import unittest

from plimsoll_placement import placement_api
from plimsoll_placement.placement_api import PlacementError


class Response:
    def __init__(self, status, body):
        self.status_code = status
        self.text = json.dumps(body) if not isinstance(body, str) else body

    def json(self):
        return json.loads(self.text)


class FakeAdapter:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def request(self, url, method, **kwargs):
        self.calls.append((method, url, kwargs))
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a


class PlacementApiTest(unittest.TestCase):
    def test_reasons(self):
        cases = [
            (Response(409, {"errors": [{"code": "placement.concurrent_update"}]}), "conflict"),
            (Response(500, "boom"), "http_500"),
            (Response(503, "down"), "http_503"),
            (Response(401, ""), "auth"),
            (Response(403, ""), "forbidden"),
            (ConnectionError("refused"), "unreachable"),
            (Response(200, "<html>"), "bad_response"),
        ]
        for answer, reason in cases:
            with self.subTest(reason=reason):
                p = placement_api.Placement(FakeAdapter(answer), "set noauth_token", authenticated=False)
                with self.assertRaises(PlacementError) as e:
                    p.memory_inventory("rp")
                self.assertEqual(e.exception.reason, reason)
                if reason in ("auth", "forbidden"):
                    self.assertIn("set noauth_token", str(e.exception))

    def test_put_sends_generation_microversion_and_every_field(self):
        a = FakeAdapter(Response(200, {}))
        p = placement_api.Placement(a, "", authenticated=False)
        rec = dict(total=1, reserved=0, min_unit=1, max_unit=1, step_size=1, allocation_ratio=0.5)
        p.put_memory_inventory("rp", 7, rec)
        method, url, kw = a.calls[0]
        self.assertEqual((method, url), ("PUT", "/resource_providers/rp/inventories/MEMORY_MB"))
        self.assertEqual(kw["json"], dict(rec, resource_provider_generation=7))
        self.assertEqual(kw["microversion"], "1.26")
        self.assertFalse(kw["authenticated"])

    def test_provider_lookup(self):
        p = placement_api.Placement(FakeAdapter(Response(200, {"resource_providers": []})), "")
        with self.assertRaises(PlacementError) as e:
            p.provider_uuid("compute 1")
        self.assertEqual(e.exception.reason, "provider_not_found")
        self.assertIn("resource_provider_name", str(e.exception))
        a = FakeAdapter(Response(200, {"resource_providers": [{"uuid": "u1"}]}))
        self.assertEqual(placement_api.Placement(a, "").provider_uuid("compute 1"), "u1")
        self.assertEqual(a.calls[0][1], "/resource_providers?name=compute%201")

    def test_adapter_made_at_first_use_and_its_failure_is_counted(self):
        def factory():
            raise ConnectionError("keystone down")
        p = placement_api.Placement(factory, "")
        with self.assertRaises(PlacementError) as e:
            p.memory_allocations("rp")
        self.assertEqual(e.exception.reason, "unreachable")
        made = []

        def good():
            made.append(1)
            return FakeAdapter(Response(200, {"allocations": {"c1": {"resources": {"MEMORY_MB": 512, "VCPU": 1}},
                                                              "c2": {"resources": {"VCPU": 2}}}}),
                               Response(200, {"allocations": {}}))
        p = placement_api.Placement(good, "")
        self.assertEqual(p.memory_allocations("rp"), {"c1": 512})
        self.assertEqual(p.memory_allocations("rp"), {})
        self.assertEqual(made, [1])


if __name__ == "__main__":
    unittest.main()
