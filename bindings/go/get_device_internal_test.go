package smartdev

import (
	"errors"
	"testing"
)

// readOutcome turns sd_get_device's SD_INSUFFICIENT_SIZE message into the read's error (the path GetDevice
// takes for an object bigger than its buffer, where the code itself is SD_INSUFFICIENT_SIZE).
func TestReadOutcomeFromTheSizeMessage(t *testing.T) {
	if err := readOutcome("the buffer holds 8 bytes; the device object needs 900 (the device was read): call sd_device ..."); err != nil {
		t.Errorf("a successful read gave %v", err)
	}
	err := readOutcome("the buffer holds 8 bytes; the device object needs 900 (the read failed (SD_TIMEOUT: device Attic (ID: 3): GET /shelly timed out)): call sd_device ...")
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("a timed-out read gave %v, want ErrTimeout", err)
	}
	if err := readOutcome("the read failed (SD_NOT_A_CODE: x)"); !errors.Is(err, ErrDevice) {
		t.Errorf("an unrecognised code gave %v, want ErrDevice", err)
	}
}
