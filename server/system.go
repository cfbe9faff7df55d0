package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"rsql/broker"
)

// SystemConfig configures the whole rsql system of one process: the bundled broker, the
// engine, the Postgres-wire server and HTTP. An empty listen address turns that listener off.
type SystemConfig struct {
	DataDir     string
	PgAddr      string
	NamesrvAddr string
	BrokerAddr  string
	HTTPAddr    string
	// StateBackend: see Config.
	StateBackend string
	Log          io.Writer
	Version      string
}

// System is broker, engine and servers running together.
type System struct {
	Engine *Engine
	Broker *broker.Broker
	pg     *PGServer
	pgLn   net.Listener
	http   *http.Server
	httpLn net.Listener
}

// StartSystem opens the broker store and the engine in cfg.DataDir and starts the listeners.
func StartSystem(cfg SystemConfig) (*System, error) {
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "./rsql-data"
	}
	// The engine takes the data-directory lock first, so a second process fails cleanly
	// before touching the broker's files.
	eng, err := Open(Config{DataDir: cfg.DataDir, StateBackend: cfg.StateBackend, Log: cfg.Log, deferJobs: true})
	if err != nil {
		return nil, err
	}
	s := &System{Engine: eng}
	b, err := broker.Open(broker.Config{Dir: filepath.Join(cfg.DataDir, "broker")})
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("open broker store: %w", err)
	}
	s.Broker = b
	eng.cfg.Broker = b
	if cfg.NamesrvAddr != "" || cfg.BrokerAddr != "" {
		if err := b.Serve(cfg.NamesrvAddr, cfg.BrokerAddr); err != nil {
			s.Close()
			return nil, fmt.Errorf("broker listeners: %w", err)
		}
	}
	eng.startRecordedJobs()
	if cfg.PgAddr != "" {
		ln, err := net.Listen("tcp", cfg.PgAddr)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("Postgres-wire listener on %s: %w", cfg.PgAddr, err)
		}
		s.pgLn = ln
		s.pg = NewPGServer(eng, PGConfig{ServerVersion: "15.0 (rsql " + cfg.Version + ")"})
		go s.pg.Serve(ln)
	}
	if cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("HTTP listener on %s: %w", cfg.HTTPAddr, err)
		}
		s.httpLn = ln
		reg := prometheus.NewRegistry()
		reg.MustRegister(&engineCollector{e: eng}, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
		s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go s.http.Serve(ln)
	}
	return s, nil
}

// PgAddr returns the Postgres-wire listen address ("" when off).
func (s *System) PgAddr() string {
	if s.pgLn == nil {
		return ""
	}
	return s.pgLn.Addr().String()
}

// Close stops the listeners, the jobs (checkpointing them), the broker, and releases the data
// directory.
func (s *System) Close() error {
	var errs []error
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.http.Shutdown(ctx)
		cancel()
	}
	if s.pg != nil {
		s.pg.Close()
	}
	if s.Engine != nil {
		errs = append(errs, s.Engine.Close())
	}
	if s.Broker != nil {
		errs = append(errs, s.Broker.Close())
	}
	return errors.Join(errs...)
}

// engineCollector exports per-job counters from the engine's running jobs.
type engineCollector struct{ e *Engine }

var (
	descIn        = prometheus.NewDesc("rsql_job_records_in_total", "Records read and decoded by a job.", []string{"job"}, nil)
	descOut       = prometheus.NewDesc("rsql_job_records_out_total", "Rows a job wrote to its sink.", []string{"job"}, nil)
	descLate      = prometheus.NewDesc("rsql_job_late_records_total", "Records that arrived after all their windows fired.", []string{"job"}, nil)
	descBad       = prometheus.NewDesc("rsql_job_bad_records_total", "Records that failed to decode.", []string{"job"}, nil)
	descWatermark = prometheus.NewDesc("rsql_job_watermark_delay_seconds", "Wall clock minus the job's watermark.", []string{"job"}, nil)
	descLag       = prometheus.NewDesc("rsql_job_split_lag_records", "Messages a source split is behind its end.", []string{"job", "stream", "split"}, nil)
)

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIn, descOut, descLate, descBad, descWatermark, descLag} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	c.e.mu.Lock()
	jobs := make([]*runningJob, 0, len(c.e.jobs))
	for _, j := range c.e.jobs {
		jobs = append(jobs, j)
	}
	c.e.mu.Unlock()
	now := time.Now().UnixMilli()
	for _, j := range jobs {
		st := j.job.Stats()
		id := j.def.ID
		ch <- prometheus.MustNewConstMetric(descIn, prometheus.CounterValue, float64(st.RecordsIn), id)
		ch <- prometheus.MustNewConstMetric(descOut, prometheus.CounterValue, float64(st.RecordsOut), id)
		ch <- prometheus.MustNewConstMetric(descLate, prometheus.CounterValue, float64(st.Late), id)
		ch <- prometheus.MustNewConstMetric(descBad, prometheus.CounterValue, float64(st.Bad), id)
		if st.Watermark > -1<<62 && st.Watermark < 1<<62 {
			ch <- prometheus.MustNewConstMetric(descWatermark, prometheus.GaugeValue, float64(now-st.Watermark)/1000, id)
		}
		for _, sp := range st.Splits {
			if sp.Lag >= 0 {
				ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(sp.Lag), id, sp.Stream, sp.Split)
			}
		}
	}
}
