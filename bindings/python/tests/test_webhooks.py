"""Webhooks: an HTTP GET to the listener makes the wake descriptor readable; events are pulled as dicts."""

from __future__ import annotations

import select
import selectors
import unittest
import urllib.error
import urllib.request

import smartdev

from .support import SimulatedCase

HOOK = "/shelly/webhook?Event=switch.on&DeviceID=1&ObjectType=output&ComponentID=1"


def get(address: str, target: str) -> int:
    """Sends ``GET http://<address><target>``; returns the HTTP status."""
    try:
        with urllib.request.urlopen(f"http://{address}{target}", timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


class WebhookTest(SimulatedCase):
    def test_an_event_wakes_select_and_is_pulled_once(self) -> None:
        ctl = self.open(webhooks=True)
        address = ctl.webhook_address()
        self.assertTrue(address.startswith("127.0.0.1:"), address)
        self.assertNotEqual(address, "127.0.0.1:0")
        fd = ctl.wake_fd()
        self.assertEqual(select.select([fd], [], [], 0)[0], [])
        self.assertIsNone(ctl.pull_webhook_event())

        self.assertEqual(get(address, HOOK), 200)
        readable, _, _ = select.select([fd], [], [], 5)
        self.assertEqual(readable, [fd])
        self.assertTrue(ctl.wait_wake(0))
        ctl.clear_wake()
        self.assertEqual(select.select([fd], [], [], 0)[0], [])

        event = ctl.pull_webhook_event()
        assert event is not None
        self.assertEqual(event["Event"], "switch.on")
        self.assertEqual(event["Device"], "Garage")
        self.assertEqual(event["DeviceID"], 1)
        self.assertEqual(event["Component"], "Light")
        self.assertEqual(event["ComponentID"], 1)
        self.assertEqual(event["ObjectType"], "output")
        self.assertTrue(event["Source"].startswith("127.0.0.1"))
        self.assertTrue(event["ReceivedAt"])
        self.assertEqual(event["Params"], {})
        self.assertIsNone(ctl.pull_webhook_event())

    def test_drain_loop_with_selectors(self) -> None:
        ctl = self.open(webhooks=True)
        address = ctl.webhook_address()
        for _ in range(3):
            self.assertEqual(get(address, HOOK), 200)
        sel = selectors.DefaultSelector()
        self.addCleanup(sel.close)
        sel.register(ctl.wake_fd(), selectors.EVENT_READ)
        events = []
        while len(events) < 3 and sel.select(timeout=5):
            ctl.clear_wake()  # before draining, so an event arriving meanwhile wakes us again
            while (e := ctl.pull_webhook_event()) is not None:
                events.append(e)
        self.assertEqual([e["Event"] for e in events], ["switch.on"] * 3)

    def test_wait_wake_times_out_without_events(self) -> None:
        ctl = self.open(webhooks=True)
        self.assertFalse(ctl.wait_wake(0.05))
        self.assertFalse(ctl.wait_wake(-1))  # a negative timeout does not wait

    def test_a_bad_event_is_refused(self) -> None:
        ctl = self.open(webhooks=True)
        self.assertEqual(get(ctl.webhook_address(), "/shelly/webhook?Event=nope"), 400)
        self.assertIsNone(ctl.pull_webhook_event())

    def test_without_a_wake_flag(self) -> None:
        ctl = self.open(webhooks=True, wake=False)
        with self.assertRaises(smartdev.InvalidArgumentError):
            ctl.wake_fd()
        with self.assertRaises(smartdev.InvalidArgumentError):
            ctl.wait_wake(0)
        self.assertEqual(get(ctl.webhook_address(), HOOK), 200)
        event = ctl.pull_webhook_event()  # events are still queued and pulled
        assert event is not None
        self.assertEqual(event["Component"], "Light")


if __name__ == "__main__":
    unittest.main()
