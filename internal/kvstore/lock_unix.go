//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package kvstore

import "os"

// bootID names the running kernel's boot: when it changed since a file was last open,
// the machine restarted, and writes that were never fsynced may be lost or torn.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "" // unknown: treated as a restart (see OpenBolt)
	}
	return string(trimSpace(b))
}
