/* HTTPS devices through the C API, written from the header alone: a device whose certificate is pinned by
 * fingerprint is read over TLS (its push channel is WSS) and switched; a device presenting another
 * certificate than its pin is refused with SD_CERTIFICATE, naming both fingerprints, and is never switched;
 * a device with no pin is trusted at first use and its fingerprint written to the trust file. The harness
 * passes the emulator's ports and each device's certificate fingerprint, and checks the outputs after. */
#include "sd_test.h"

static const char *CONFIG =
    "SmartDevices:\n"
    "  ResponseTimeout: 2\n"
    "  RetryCount: 0\n"
    "  PingAllowed: false\n"
    "  RefreshInterval: 0\n"
    "  TrustFile: %s/trust.json\n"
    "  Devices:\n"
    "    - {Name: Pinned, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Tls: true, CertSha256: '%s'}\n"
    "    - {Name: Wrong, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Tls: true, CertSha256: '%s'}\n"
    "    - {Name: FirstUse, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: %s, Tls: true}\n";

/* Whether the file at `path` contains `needle`. */
static bool file_contains(const char *path, const char *needle) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return false;
  char text[8192];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  return strstr(text, needle) != NULL;
}

int main(void) {
  const char *dir = sd_env("SD_TEST_DIR");
  const char *fp0 = sd_env("SD_EMU_FP_0"), *fp1 = sd_env("SD_EMU_FP_1"), *fp2 = sd_env("SD_EMU_FP_2");
  char yaml[4096];
  /* Device 1 is pinned to device 2's certificate: it presents its own. */
  snprintf(yaml, sizeof yaml, CONFIG, dir, sd_env("SD_EMU_PORT_0"), fp0, sd_env("SD_EMU_PORT_1"), fp2,
           sd_env("SD_EMU_PORT_2"));
  sd_controller *ctl = NULL;
  CHECK_RC(sd_open_yaml(yaml, NULL, &ctl), SD_OK);
  if (ctl == NULL) return sd_summary();

  char buf[16384];
  size_t needed = 0;
  CHECK_RC(sd_read_device(ctl, "Pinned", 0), SD_OK);
  CHECK_RC(sd_device(ctl, "Pinned", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Transport\":\"https\"") != NULL);
  CHECK(strstr(buf, "\"Online\":true") != NULL);
  bool state = false, changed = false;
  CHECK_RC(sd_change_output(ctl, NULL, 1, true, &state, &changed), SD_OK);
  CHECK(state && changed);
  struct sd_meter_reading m;
  CHECK_RC(sd_meter(ctl, NULL, 1, &m), SD_OK);
  CHECK(m.has_voltage);

  /* Another certificate than the pin: refused, both fingerprints named, the way to accept it said. */
  CHECK_RC(sd_read_device(ctl, "Wrong", 0), SD_CERTIFICATE);
  CHECK_RC(sd_last_error_message(buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, fp1) != NULL && strstr(buf, fp2) != NULL);
  CHECK(strstr(buf, "CertSha256") != NULL);
  CHECK_RC(sd_change_output(ctl, NULL, 2, true, &state, &changed), SD_CERTIFICATE);
  bool online = true;
  CHECK_RC(sd_is_device_online(ctl, "Wrong", 0, &online), SD_OK);
  CHECK(!online);
  CHECK_RC(sd_device(ctl, "Wrong", 0, buf, sizeof buf, &needed), SD_OK);
  CHECK(strstr(buf, "\"Online\":false") != NULL && strstr(buf, fp1) != NULL);

  /* No pin: the first certificate seen is trusted and kept in the trust file under the device's name. */
  CHECK_RC(sd_read_device(ctl, "FirstUse", 0), SD_OK);
  char trust[1024];
  snprintf(trust, sizeof trust, "%s/trust.json", dir);
  CHECK(file_contains(trust, "FirstUse") && file_contains(trust, fp2));
  CHECK(!file_contains(trust, "Pinned"));

  sd_close(&ctl);
  return sd_summary();
}
