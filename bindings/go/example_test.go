package smartdev_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	smartdev "github.com/smartdev/smartdev/bindings/go"
)

// Opens an installation, switches an output and reads a meter.
func ExampleOpen() {
	ctl, err := smartdev.Open("smartdev.yaml")
	if err != nil {
		log.Fatal(err)
	}
	defer ctl.Close()
	_, did, err := ctl.ChangeOutput(smartdev.ByName("Door Light"), true)
	if errors.Is(err, smartdev.ErrTimeout) {
		log.Fatal("the device did not answer: ", err)
	}
	fmt.Println("changed:", did)
	m, err := ctl.Meter(smartdev.ByName("Door Meter"))
	if err == nil && m.Power != nil {
		fmt.Printf("%.1f W\n", *m.Power)
	}
}

// Receives webhook events for a minute.
func ExampleController_Events() {
	ctl, err := smartdev.Open("smartdev.yaml") // with ShellyWebhooks: {Enabled: true}
	if err != nil {
		log.Fatal(err)
	}
	defer ctl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for e := range ctl.Events(ctx) {
		fmt.Println(e.Event, e.Device, e.Component)
	}
}
