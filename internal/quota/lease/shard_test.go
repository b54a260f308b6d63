package lease

import (
	"testing"
	"unsafe"
)

// Shards are padded to a whole cache line, so that locking one does not
// slow its neighbours.
func TestShardsFillCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(leaseShard{}); n != 64 {
		t.Errorf("a lease shard takes %d bytes, want 64", n)
	}
}
