//go:build !unix

package redisstore_test

import "time"

// processCPU returns false: this system does not tell a process's CPU
// time here.
func processCPU() (time.Duration, bool) { return 0, false }
