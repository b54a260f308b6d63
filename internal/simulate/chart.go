package simulate

// charter records a Chart while Run replays a trace.
type charter struct {
	*Chart
	customer int32
	buckets  int
}

// newChart sets up the chart of the customer asking for the most units,
// in at most cfg.ChartBuckets buckets of whole windows, or returns nil.
func newChart(tr *Trace, cfg Config, length int64, lanes []*lane) *charter {
	if cfg.ChartBuckets <= 0 || len(tr.Checks) == 0 {
		return nil
	}
	first, last := tr.Checks[0].Ms, tr.Checks[len(tr.Checks)-1].Ms
	start := first - first%length
	span := last + 1 - start
	windows := (span + length - 1) / length
	bucket := length * ((windows + int64(cfg.ChartBuckets) - 1) / int64(cfg.ChartBuckets))
	ch := &charter{
		Chart:    &Chart{Start: start, Bucket: bucket, Window: length, Limit: cfg.Limit},
		customer: tr.Busiest(),
		buckets:  int((span + bucket - 1) / bucket),
	}
	ch.Customer = tr.Customers[ch.customer]
	for _, l := range lanes {
		l.peaks = make([]int64, ch.buckets)
	}
	return ch
}

// advance samples, for every bucket that starts after the lane's last
// check of the customer and no later than ms, what the lane holds in the
// window at the bucket's start.
func (ch *charter) advance(l *lane, ms int64) {
	w := &l.windows[ch.customer]
	for ; l.sampled < ch.buckets; l.sampled++ {
		at := ch.Start + int64(l.sampled)*ch.Bucket
		if at > ms {
			return
		}
		l.peaks[l.sampled] = max(l.peaks[l.sampled], w.Used(at))
	}
}

// record notes that the lane holds units in the window at ms.
func (ch *charter) record(l *lane, ms, units int64) {
	b := (ms - ch.Start) / ch.Bucket
	l.peaks[b] = max(l.peaks[b], units)
}

// finish samples the lane's remaining buckets and adds its series.
func (ch *charter) finish(l *lane) {
	ch.advance(l, ch.Start+int64(ch.buckets)*ch.Bucket-1)
	ch.Names = append(ch.Names, l.name)
	ch.Peaks = append(ch.Peaks, l.peaks)
}
