package smartdev_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	smartdev "github.com/smartdev/smartdev/bindings/go"
)

const hookPath = "/shelly/webhook?Event=switch.on&DeviceID=1&ObjectType=output&ComponentID=1"

// sendHook sends one webhook GET to the listener and checks it is accepted.
func sendHook(t *testing.T, addr, target string, want int) {
	t.Helper()
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + target)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("GET %s: status %d, want %d", target, resp.StatusCode, want)
	}
}

func receive(t *testing.T, ch <-chan smartdev.Event) smartdev.Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("the Events channel closed before an event arrived")
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
	}
	return smartdev.Event{}
}

func checkSwitchOn(t *testing.T, e smartdev.Event, sent time.Time) {
	t.Helper()
	if e.Event != "switch.on" || e.Device != "Garage" || e.Component != "Door Light" || e.ObjectType != "output" {
		t.Errorf("event = %+v", e)
	}
	if e.DeviceID == nil || *e.DeviceID != 1 || e.ComponentID == nil || *e.ComponentID != 1 {
		t.Errorf("event IDs: device %v component %v", e.DeviceID, e.ComponentID)
	}
	if e.ReceivedAt.IsZero() || e.ReceivedAt.Before(sent.Add(-2*time.Second)) || e.ReceivedAt.After(time.Now().Add(2*time.Second)) {
		t.Errorf("ReceivedAt = %v, sent at %v", e.ReceivedAt, sent)
	}
	if !strings.Contains(e.Source, "127.0.0.1") {
		t.Errorf("Source = %q", e.Source)
	}
}

func TestWebhookEventThroughEvents(t *testing.T) {
	ctl, _ := openSim(t, true)
	addr, err := ctl.WebhookAddress()
	must(t, err)
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("WebhookAddress = %q", addr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := ctl.Events(ctx)

	sent := time.Now()
	sendHook(t, addr, hookPath, 200)
	checkSwitchOn(t, receive(t, ch), sent)

	// A second one, with extra parameters, on the same channel.
	sendHook(t, addr, "/shelly/webhook?Event=input.toggle_on&DeviceID=1&ObjectType=input&ComponentID=2&extra=7", 200)
	e := receive(t, ch)
	if e.Event != "input.toggle_on" || e.Component != "Input 2" || e.Params["extra"] != "7" {
		t.Errorf("second event = %+v", e)
	}
	sendHook(t, addr, "/shelly/webhook?Event=nope", 400)

	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Error("an unexpected event arrived")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the channel did not close after cancel")
	}
	if e, err := ctl.PullEvent(); e != nil || err != nil {
		t.Errorf("PullEvent after the events were delivered: %v, %v", e, err)
	}
}

func TestPullEvent(t *testing.T) {
	ctl, _ := openSim(t, true)
	if e, err := ctl.PullEvent(); e != nil || err != nil {
		t.Fatalf("PullEvent on an empty queue: %v, %v", e, err)
	}
	addr, err := ctl.WebhookAddress()
	must(t, err)
	sent := time.Now()
	sendHook(t, addr, hookPath, 200)
	var e *smartdev.Event
	for deadline := time.Now().Add(5 * time.Second); e == nil && time.Now().Before(deadline); {
		e, err = ctl.PullEvent()
		must(t, err)
		time.Sleep(10 * time.Millisecond)
	}
	if e == nil {
		t.Fatal("no event within 5 s")
	}
	checkSwitchOn(t, *e, sent)
	if e, err := ctl.PullEvent(); e != nil || err != nil {
		t.Errorf("second PullEvent: %v, %v", e, err)
	}
}

func TestEventsWithoutWakeFlag(t *testing.T) {
	ctl, _ := openSim(t, true, smartdev.WithoutWake())
	addr, err := ctl.WebhookAddress()
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := ctl.Events(ctx)
	sent := time.Now()
	sendHook(t, addr, hookPath, 200)
	checkSwitchOn(t, receive(t, ch), sent)
}

// An event the Events goroutine took from the library but could not deliver before its context ended is not
// lost: the next PullEvent returns it.
func TestEventsCancelledKeepsUndeliveredEvent(t *testing.T) {
	ctl, _ := openSim(t, true)
	addr, err := ctl.WebhookAddress()
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ch := ctl.Events(ctx)
	sendHook(t, addr, hookPath, 200)
	time.Sleep(500 * time.Millisecond) // the goroutine has pulled it by now and waits for a receiver
	cancel()
	for range ch {
		t.Error("an event was delivered after cancel")
	}
	e, err := ctl.PullEvent()
	must(t, err)
	if e == nil || e.Event != "switch.on" {
		t.Fatalf("PullEvent after cancel = %v, want the undelivered switch.on", e)
	}
}

func TestCloseEndsEvents(t *testing.T) {
	ctl, err := smartdev.OpenYAML(simConfig(t.TempDir(), true), smartdev.WithSchemaYAML(schema))
	must(t, err)
	ch := ctl.Events(context.Background())
	time.Sleep(50 * time.Millisecond) // let the goroutine reach poll(2)
	start := time.Now()
	must(t, ctl.Close())
	select {
	case _, ok := <-ch:
		if ok {
			t.Error("an unexpected event arrived")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the channel did not close after Close")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close and channel close took %v", d)
	}
}
