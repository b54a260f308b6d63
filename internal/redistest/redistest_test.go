package redistest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/quotad/quotad/internal/redistest"
)

// A prefix's keys are gone once its test ends.
func TestPrefixDeletesItsKeys(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	var prefix string
	t.Run("writes", func(t *testing.T) {
		prefix = redistest.Prefix(t)
		for _, k := range []string{"a", "{x}b", "c:log"} {
			if err := c.Do(ctx, c.B().Set().Key(prefix+k).Value("1").Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	})
	keys, err := c.Do(ctx, c.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("keys left under %s: %v", prefix, keys)
	}
}

// A test's own server answers, stops answering when stopped, and answers
// on the same URL when started again.
func TestServerStopsAndStarts(t *testing.T) {
	s := redistest.StartServer(t)
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") {
		t.Fatalf("URL %q", s.URL())
	}
	ping := func() error {
		o, err := rueidis.ParseURL(s.URL())
		if err != nil {
			t.Fatal(err)
		}
		o.DisableCache = true
		c, err := rueidis.NewClient(o)
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Do(context.Background(), c.B().Ping().Build()).Error()
	}
	if err := ping(); err != nil {
		t.Fatalf("started: %v", err)
	}
	s.Stop()
	if err := ping(); err == nil {
		t.Fatal("stopped, it still answers")
	}
	s.Start()
	if err := ping(); err != nil {
		t.Fatalf("started again: %v", err)
	}
}
