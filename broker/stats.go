package broker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// brokerStats counts messages stored and handed out, and keeps one sample a second for
// ten minutes so rates over 10 s, 1 min and 10 min can be answered (GET_BROKER_RUNTIME_INFO,
// GET_CONSUME_STATS). The counters are atomic; mu guards the samples and per-group
// counters' samples.
type brokerStats struct {
	boot time.Time
	put  atomic.Int64 // messages stored (user topics, retry and dead-letter included)

	mu      sync.Mutex
	samples []statSample // oldest first, at most statWindow+1
	groups  map[string]*groupStat
	day     int
	// putMorning/getMorning: the counters at the start of today and of yesterday.
	putToday, putYesterday, getToday, getYesterday int64
}

type statSample struct {
	at       time.Time
	put, get int64
}

// groupStat is one consumer group's served-message counter and its samples.
type groupStat struct {
	served  atomic.Int64
	samples []statSample // get only
}

const statWindow = 600

func newBrokerStats() *brokerStats {
	s := &brokerStats{boot: time.Now(), groups: map[string]*groupStat{}, day: time.Now().YearDay()}
	return s
}

// group returns a group's counter, creating it.
func (s *brokerStats) group(name string) *groupStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[name]
	if g == nil {
		// Start from zero now, so what the group pulls before the next sample counts.
		g = &groupStat{samples: []statSample{{at: time.Now()}}}
		s.groups[name] = g
	}
	return g
}

// sample records the counters (once a second).
func (s *brokerStats) sample(now time.Time, get int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	put := s.put.Load()
	if d := now.YearDay(); d != s.day {
		s.day = d
		s.putYesterday, s.putToday = s.putToday, put
		s.getYesterday, s.getToday = s.getToday, get
	}
	s.samples = append(s.samples, statSample{at: now, put: put, get: get})
	if len(s.samples) > statWindow+1 {
		s.samples = s.samples[len(s.samples)-statWindow-1:]
	}
	for _, g := range s.groups {
		g.samples = append(g.samples, statSample{at: now, get: g.served.Load()})
		if len(g.samples) > 61 {
			g.samples = g.samples[len(g.samples)-61:]
		}
	}
}

// rate is the per-second increase of f over the last span of samples (0 without two).
func rate(samples []statSample, span time.Duration, f func(statSample) int64) float64 {
	if len(samples) < 2 {
		return 0
	}
	last := samples[len(samples)-1]
	first := samples[0]
	for _, s := range samples {
		if last.at.Sub(s.at) <= span {
			first = s
			break
		}
	}
	d := last.at.Sub(first.at).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(f(last)-f(first)) / d
}

// tps renders rates over 10 s, 1 min and 10 min as RocketMQ does ("1.00 2.00 3.00").
func (s *brokerStats) tps(f func(statSample) int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%.2f %.2f %.2f", rate(s.samples, 10*time.Second, f), rate(s.samples, time.Minute, f),
		rate(s.samples, 10*time.Minute, f))
}

// groupTPS is a group's consume rate over the last minute.
func (s *brokerStats) groupTPS(name string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[name]
	if g == nil {
		return 0
	}
	// Include the counter as it is now, so a burst in the current second counts.
	samples := append(append([]statSample(nil), g.samples...), statSample{at: time.Now(), get: g.served.Load()})
	return rate(samples, time.Minute, func(x statSample) int64 { return x.get })
}
