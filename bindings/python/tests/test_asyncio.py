"""``async for event in ctl.events()`` in a real asyncio loop: webhook events sent to simulated devices'
listener, and a push event from ``sdctl emulate``.

No test bounds how fast an event arrives (bench_events.py measures that): each waits for what it expects.
``HANG_GUARD`` only turns a hang into a failure instead of a stuck test run.
"""

from __future__ import annotations

import asyncio
import os
import threading
import unittest
import urllib.request
from typing import Any, Awaitable, Dict, List, TypeVar

from smartdev import ClosedError, Controller, InvalidArgumentError

from .support import SimulatedCase
from .test_emulator import SDCTL_BIN, start_emulator, stop_emulator
from .test_webhooks import HOOK, get

#: Seconds after which a wait that should end counts as hung (not a speed requirement).
HANG_GUARD = 60.0

T = TypeVar("T")


async def guarded(aw: Awaitable[T]) -> T:
    return await asyncio.wait_for(aw, HANG_GUARD)


async def send(ctl: Controller, target: str = HOOK) -> None:
    """What a device does when its input toggles: a GET to the webhook listener (in a thread: it blocks)."""
    status = await asyncio.to_thread(get, ctl.webhook_address(), target)
    assert status == 200, status


async def next_event(ctl: Controller) -> Dict[str, Any]:
    """The next event through a fresh ``async for``."""
    async for event in ctl.events():
        return event
    raise AssertionError("the iteration ended without an event")


async def waiting(task: "asyncio.Task[Any]") -> None:
    """Returns once ``task`` has run up to its first real wait (one loop turn: pulling finds nothing, then it
    awaits the descriptor)."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not task.done(), "the iteration ended before any event"


class AsyncEventsTest(SimulatedCase):
    def test_an_event_reaches_async_for(self) -> None:
        ctl = self.open(webhooks=True)

        async def scenario() -> Dict[str, Any]:
            receiver = asyncio.ensure_future(next_event(ctl))
            await waiting(receiver)  # already waiting on the descriptor when the device calls
            await send(ctl)
            return await guarded(receiver)

        event = asyncio.run(scenario())
        self.assertEqual(event["Event"], "switch.on")
        self.assertEqual(event["Device"], "Garage")
        self.assertEqual(event["Component"], "Light")
        self.assertEqual(event["Channel"], "webhook")
        self.assertIsNone(ctl.pull_webhook_event())  # delivered once

    def test_queued_events_come_in_order_then_it_waits_for_more(self) -> None:
        ctl = self.open(webhooks=True)
        hooks = [HOOK, HOOK.replace("switch.on", "switch.off"), HOOK.replace("ComponentID=1", "ComponentID=2")]

        async def scenario() -> List[Dict[str, Any]]:
            for hook in hooks:
                await send(ctl, hook)
            got: List[Dict[str, Any]] = []

            async def collect() -> None:
                async for event in ctl.events():
                    got.append(event)
                    if len(got) == len(hooks) + 1:
                        return

            collector = asyncio.ensure_future(collect())
            await waiting(collector)  # the queued ones are taken without waiting; now it waits for more
            self.assertEqual(len(got), len(hooks))
            await send(ctl)
            await guarded(collector)
            return got

        events = asyncio.run(scenario())
        self.assertEqual(
            [(e["Event"], e["Component"]) for e in events],
            [("switch.on", "Light"), ("switch.off", "Light"), ("switch.on", "Fan"), ("switch.on", "Light")],
        )

    def test_cancelling_leaves_the_controller_usable(self) -> None:
        ctl = self.open(webhooks=True)

        async def scenario() -> Dict[str, Any]:
            receiver = asyncio.ensure_future(next_event(ctl))
            await waiting(receiver)
            receiver.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await receiver
            # The reader is gone: the same loop can watch the descriptor again, and blocking calls work.
            self.assertEqual(await asyncio.to_thread(ctl.change_output, "Light", True), (True, True))
            again = asyncio.ensure_future(next_event(ctl))
            await waiting(again)
            await send(ctl)
            return await guarded(again)

        event = asyncio.run(scenario())
        self.assertEqual(event["Event"], "switch.on")
        self.assertFalse(ctl.closed)

    def test_break_then_a_new_iteration_gets_the_next_event(self) -> None:
        ctl = self.open(webhooks=True)

        async def scenario() -> List[str]:
            await send(ctl)
            first = await guarded(next_event(ctl))  # returns from inside `async for`
            await send(ctl, HOOK.replace("switch.on", "switch.off"))
            second = await guarded(next_event(ctl))
            return [first["Event"], second["Event"]]

        self.assertEqual(asyncio.run(scenario()), ["switch.on", "switch.off"])

    def test_closing_on_the_loop_ends_the_iteration(self) -> None:
        ctl = self.open(webhooks=True)

        async def scenario() -> List[Dict[str, Any]]:
            got: List[Dict[str, Any]] = []
            arrived = asyncio.Event()

            async def collect() -> None:
                async for event in ctl.events():
                    got.append(event)
                    arrived.set()

            collector = asyncio.ensure_future(collect())
            await send(ctl)
            await guarded(arrived.wait())
            await waiting(collector)  # waiting for the next one
            ctl.close()
            await guarded(collector)  # finishes: no exception
            return got

        events = asyncio.run(scenario())
        self.assertEqual([e["Event"] for e in events], ["switch.on"])
        self.assertTrue(ctl.closed)

    def test_closing_from_another_thread_ends_the_iteration(self) -> None:
        ctl = self.open(webhooks=True)

        async def scenario() -> int:
            count = 0

            async def collect() -> None:
                nonlocal count
                async for _ in ctl.events():
                    count += 1

            collector = asyncio.ensure_future(collect())
            await waiting(collector)
            closer = threading.Thread(target=ctl.close)
            closer.start()
            await guarded(collector)
            await asyncio.to_thread(closer.join)
            return count

        self.assertEqual(asyncio.run(scenario()), 0)

    def test_a_closed_controller_and_one_without_wake_refuse(self) -> None:
        without = self.open(webhooks=True, wake=False)
        with self.assertRaises(InvalidArgumentError):
            without.events()
        ctl = self.open(webhooks=True)
        stream = ctl.events()
        ctl.close()
        with self.assertRaises(ClosedError):
            ctl.events()

        async def drain() -> int:
            return len([e async for e in stream])

        self.assertEqual(asyncio.run(drain()), 0)  # a stream made before closing just ends

    def test_no_descriptor_is_left_open(self) -> None:
        ctl = self.open(webhooks=True)

        async def rounds() -> None:
            for _ in range(20):
                receiver = asyncio.ensure_future(next_event(ctl))
                await waiting(receiver)
                receiver.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await receiver

        before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
        asyncio.run(rounds())
        if before is None:
            self.skipTest("no /proc/self/fd")
        # Twenty waits each duplicated the descriptor; none is left (a margin for library threads' sockets).
        self.assertLess(len(os.listdir("/proc/self/fd")), before + 5)


@unittest.skipUnless(SDCTL_BIN, "SDCTL_BIN is not set")
class AsyncEmulatorTest(unittest.TestCase):
    def test_a_pushed_device_event_reaches_async_for(self) -> None:
        proc, ports, admin = start_emulator("ShellyPlus1PM")
        self.addCleanup(stop_emulator, proc)
        yaml = (
            "SmartDevices:\n  PingAllowed: false\n  Devices:\n"
            f"    - {{Name: Pump, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {ports[0]}}}\n"
        )

        def admin_request(path: str, post: bool) -> bytes:
            req = urllib.request.Request(
                f"http://127.0.0.1:{admin}{path}", data=b"" if post else None, method="POST" if post else "GET"
            )
            with urllib.request.urlopen(req, timeout=5) as answer:
                return answer.read()  # type: ignore[no-any-return]

        async def scenario(ctl: Controller) -> Dict[str, Any]:
            # The push socket is opened in the background right after open; wait until the device has it.
            while b'"connections":1' not in await asyncio.to_thread(admin_request, "/devices/0/ws", False):
                await asyncio.sleep(0.05)
            await asyncio.to_thread(ctl.read_device, "Pump")
            receiver = asyncio.ensure_future(next_event(ctl))
            await waiting(receiver)
            # As in test_emulator.py: fire again until one arrives (the subscription may still be settling).
            while not receiver.done():
                await asyncio.to_thread(admin_request, "/devices/0/fire?event=input.toggle_on&id=0", True)
                await asyncio.wait({receiver}, timeout=0.1)
            return receiver.result()

        with Controller(yaml=yaml) as ctl:
            event = asyncio.run(asyncio.wait_for(scenario(ctl), HANG_GUARD))
        self.assertEqual(event["Event"], "input.toggle_on")
        self.assertEqual(event["Channel"], "push")
        self.assertEqual(event["Device"], "Pump")


if __name__ == "__main__":
    unittest.main()

