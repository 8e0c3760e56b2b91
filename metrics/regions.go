package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cellserver/cellserver/region"
)

// Regions is the region layer's source (region.Gate).
type Regions interface {
	Status() region.Status
}

// regionCollector exports the region layer's figures, those of INFO
// regions, per peer region.
type regionCollector struct {
	src   Regions
	descs []*prometheus.Desc

	peerUp, lastContact, forwarded, failed, served                      *prometheus.Desc
	queued, dropped, batchesSent, opsSent, retries, lag                 *prometheus.Desc
	batchesApplied, opsApplied, duplicates, fallbacks, refused, applied *prometheus.Desc
	policyMismatches, outOfSequence, resequenced                        *prometheus.Desc
}

var _ prometheus.Collector = (*regionCollector)(nil)

func newRegionCollector(src Regions) *regionCollector {
	c := &regionCollector{src: src}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		desc := prometheus.NewDesc("cellserver_region_"+name, help, labels, nil)
		c.descs = append(c.descs, desc)
		return desc
	}
	c.peerUp = d("peer_up", "1 while the peer region answered the last call, 0 when it did not or was not called yet.", "peer")
	c.lastContact = d("peer_last_contact_seconds", "Seconds since the peer region last answered (-1: never).", "peer")
	c.forwarded = d("forwarded_total", "Global decisions the peer region (their home) answered for this region.", "peer")
	c.failed = d("peer_failed_calls_total", "Calls to the peer region that found it unreachable.", "peer")
	c.served = d("served_total", "Global decisions this region (their home) made for the peer region.", "peer")
	c.queued = d("async_queued_ops", "Async consumptions waiting for, or in flight to, the peer region.", "peer")
	c.dropped = d("async_dropped_ops_total", "Async consumptions for the peer region dropped: backlog full (region-backlog-bytes), or refused by it for good.", "peer")
	c.batchesSent = d("async_batches_sent_total", "Async batches the peer region acknowledged.", "peer")
	c.opsSent = d("async_ops_sent_total", "Async consumptions the peer region acknowledged.", "peer")
	c.retries = d("async_retries_total", "Async batches to the peer region sent again (not acknowledged).", "peer")
	c.lag = d("async_lag_seconds", "Age of the oldest async consumption the peer region has not acknowledged (0: none).", "peer")
	c.batchesApplied = d("async_batches_applied_total", "Async batches of the peer region applied here.", "peer")
	c.opsApplied = d("async_ops_applied_total", "Async consumptions of the peer region applied here.", "peer")
	c.duplicates = d("async_duplicate_batches_total", "Async batches of the peer region received again and ignored.", "peer")
	c.outOfSequence = d("async_out_of_sequence_batches_total", "Async batches of the peer region refused here because batches of their lane were missing before them (nothing applied; the peer sends them again in order).", "peer")
	c.resequenced = d("async_resequenced_batches_total", "Async batches the peer region refused as out of sequence (it lacked batches it had acknowledged) and this region sent again as the one it expected.", "peer")
	c.policyMismatches = d("policy_mismatches_total", "Async consumptions and global decisions the peer region sent for keys this region's region-policy puts under another mode or home (served anyway): the two regions' policies differ.", "peer")
	c.fallbacks = d("fallbacks_total", "Global decisions answered per region-unreachable (the home did not answer).")
	c.refused = d("refused_total", "Calls of peer regions refused (wrong region name, unknown origin, malformed).")
	return c
}

func (c *regionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *regionCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := c.src.Status()
	counter(c.fallbacks, st.Fallbacks)
	counter(c.refused, st.Refused)
	for _, p := range st.Peers {
		gauge(c.peerUp, b2f(p.State == "up"), p.Name)
		lc := float64(-1)
		if p.LastContactMs >= 0 {
			lc = float64(p.LastContactMs) / 1e3
		}
		gauge(c.lastContact, lc, p.Name)
		counter(c.forwarded, p.Forwarded, p.Name)
		counter(c.failed, p.Failed, p.Name)
		counter(c.served, p.Served, p.Name)
		gauge(c.queued, float64(p.Queued), p.Name)
		counter(c.dropped, p.Dropped, p.Name)
		counter(c.batchesSent, p.BatchesSent, p.Name)
		counter(c.opsSent, p.OpsSent, p.Name)
		counter(c.retries, p.Retries, p.Name)
		gauge(c.lag, float64(p.LagMs)/1e3, p.Name)
		counter(c.batchesApplied, p.BatchesApplied, p.Name)
		counter(c.opsApplied, p.OpsApplied, p.Name)
		counter(c.duplicates, p.Duplicates, p.Name)
		counter(c.policyMismatches, p.PolicyMismatches, p.Name)
		counter(c.outOfSequence, p.OutOfSequence, p.Name)
		counter(c.resequenced, p.Resequenced, p.Name)
	}
}
