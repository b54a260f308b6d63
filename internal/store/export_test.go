package store

import (
	"net"
	"time"
)

// To migrates the schema up or down to version v.
func (ms Migrations) To(v uint) error {
	m, _, done, err := ms.migrator()
	if err != nil {
		return err
	}
	defer done()
	return m.Migrate(v)
}

// QuietFor returns how long ago c last received a byte, as the kernel
// counts it (see tcpStateOf).
func QuietFor(c net.Conn) (time.Duration, bool) {
	s, known := tcpStateOf(c)
	return s.quiet, known
}
