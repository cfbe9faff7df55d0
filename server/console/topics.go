package console

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"rsql/broker"
	"rsql/connectors"
	"rsql/sql"
)

type columnJSON struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

func columnsJSON(s sql.Schema) []columnJSON {
	out := make([]columnJSON, len(s))
	for i, c := range s {
		out[i] = columnJSON{Name: c.Name, Type: c.Type.String()}
	}
	return out
}

// streamJSON is a stream or materialized view as the console shows it.
type streamJSON struct {
	Name           string            `json:"name"`
	IsView         bool              `json:"is_view"`
	Columns        []columnJSON      `json:"columns"`
	EventTime      string            `json:"event_time,omitempty"`
	WatermarkDelay string            `json:"watermark_delay,omitempty"`
	Options        map[string]string `json:"options"`
	Connector      string            `json:"connector"`
	Topic          string            `json:"topic,omitempty"`
	Path           string            `json:"path,omitempty"`
	Format         string            `json:"format,omitempty"`
	// Job writes the stream (a derived stream or view); Readers are the live jobs reading it.
	Job       string   `json:"job,omitempty"`
	Readers   []string `json:"readers"`
	Statement string   `json:"statement"`
}

func (c *console) streamOf(d Stream, jobs []Job) streamJSON {
	s := streamJSON{Name: d.Name, IsView: d.IsView, Columns: columnsJSON(d.Schema), EventTime: d.EventTime,
		Options: d.Options, Connector: d.Options["connector"], Format: d.Options["format"], Job: d.Job,
		Statement: d.Statement, Readers: []string{}}
	if s.Options == nil {
		s.Options = map[string]string{}
	}
	if d.EventTime != "" {
		s.WatermarkDelay = (time.Duration(d.WatermarkDelay) * time.Millisecond).String()
	}
	switch s.Connector {
	case "broker":
		s.Topic = d.Topic
	case "file":
		s.Path = d.Options["path"]
	}
	for _, j := range jobs {
		if j.Live && slices.ContainsFunc(j.Sources, func(x string) bool { return strings.EqualFold(x, d.Name) }) {
			s.Readers = append(s.Readers, j.ID)
		}
	}
	return s
}

func (c *console) listStreams(w http.ResponseWriter, r *http.Request) {
	jobs := c.e.Jobs()
	out := []streamJSON{}
	for _, d := range c.e.Streams() {
		out = append(out, c.streamOf(d, jobs))
	}
	writeJSON(w, http.StatusOK, map[string]any{"streams": out})
}

func (c *console) getStream(w http.ResponseWriter, r *http.Request) {
	d, ok := c.e.Stream(r.PathValue("name"))
	if !ok {
		apiError(w, http.StatusNotFound, sql.CodeUnknownTable, "stream or view "+strconv.Quote(r.PathValue("name"))+" does not exist")
		return
	}
	writeJSON(w, http.StatusOK, c.streamOf(d, c.e.Jobs()))
}

type topicJSON struct {
	Name     string      `json:"name"`
	System   bool        `json:"system"`
	Queues   []queueJSON `json:"queues"`
	Messages int64       `json:"messages"`
	// Streams are the streams declared over the topic (their format decodes its messages).
	Streams []string    `json:"streams"`
	Groups  []groupJSON `json:"groups"`
}

type queueJSON struct {
	Queue     int   `json:"queue"`
	MinOffset int64 `json:"min_offset"`
	MaxOffset int64 `json:"max_offset"`
	Messages  int64 `json:"messages"`
}

// groupJSON is a consumer group's committed offsets in a topic; a job's is "rsql-<job>".
type groupJSON struct {
	Group  string           `json:"group"`
	Lag    int64            `json:"lag"`
	Queues []groupQueueJSON `json:"queues"`
}

type groupQueueJSON struct {
	Queue  int   `json:"queue"`
	Offset int64 `json:"offset"`
	Lag    int64 `json:"lag"`
}

// needBroker answers 501 when the process runs no bundled broker.
func (c *console) needBroker(w http.ResponseWriter) bool {
	if c.b == nil {
		apiError(w, http.StatusNotImplemented, sql.CodeNotSupported, "topics are shown for the bundled broker only, and this rsql runs none (it uses --namesrv)")
		return false
	}
	return true
}

func (c *console) topicOf(t broker.TopicInfo, streams []Stream) topicJSON {
	tj := topicJSON{Name: t.Name, System: broker.IsSystemTopic(t.Name), Queues: []queueJSON{}, Streams: []string{}, Groups: []groupJSON{}}
	maxes := make([]int64, t.Queues)
	for q := 0; q < t.Queues; q++ {
		lo, err1 := c.b.MinOffset(t.Name, q)
		hi, err2 := c.b.MaxOffset(t.Name, q)
		if err1 != nil || err2 != nil {
			continue
		}
		maxes[q] = hi
		tj.Queues = append(tj.Queues, queueJSON{Queue: q, MinOffset: lo, MaxOffset: hi, Messages: hi - lo})
		tj.Messages += hi - lo
	}
	for _, d := range streams {
		if d.Options["connector"] == "broker" && d.Topic == t.Name {
			tj.Streams = append(tj.Streams, d.Name)
		}
	}
	groups := c.b.TopicGroupOffsets(t.Name)
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.Sort(names)
	for _, g := range names {
		gj := groupJSON{Group: g, Queues: []groupQueueJSON{}}
		for q := 0; q < t.Queues; q++ {
			o, ok := groups[g][q]
			if !ok {
				continue
			}
			lag := max(0, maxes[q]-o)
			gj.Queues = append(gj.Queues, groupQueueJSON{Queue: q, Offset: o, Lag: lag})
			gj.Lag += lag
		}
		tj.Groups = append(tj.Groups, gj)
	}
	return tj
}

func (c *console) listTopics(w http.ResponseWriter, r *http.Request) {
	if !c.needBroker(w) {
		return
	}
	system := r.URL.Query().Get("system") == "1"
	streams := c.e.Streams()
	out := []topicJSON{}
	for _, t := range c.b.Topics() {
		if broker.IsSystemTopic(t.Name) && !system {
			continue
		}
		out = append(out, c.topicOf(t, streams))
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": out})
}

func (c *console) getTopic(w http.ResponseWriter, r *http.Request) {
	if !c.needBroker(w) {
		return
	}
	t, ok := c.b.Topic(r.PathValue("topic"))
	if !ok {
		apiError(w, http.StatusNotFound, "", "topic "+strconv.Quote(r.PathValue("topic"))+" does not exist")
		return
	}
	writeJSON(w, http.StatusOK, c.topicOf(t, c.e.Streams()))
}

type messageJSON struct {
	Offset     int64             `json:"offset"`
	StoreTime  *string           `json:"store_time"`
	BornTime   *string           `json:"born_time"`
	Key        string            `json:"key,omitempty"`
	Tags       string            `json:"tags,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	// Body is the message body as text when it is UTF-8, else BodyBase64 holds it.
	Body       *string `json:"body,omitempty"`
	BodyBase64 string  `json:"body_base64,omitempty"`
	// Values is the body decoded with the stream's format, in its columns' order;
	// DecodeError says why it could not be.
	Values      []any  `json:"values,omitempty"`
	DecodeError string `json:"decode_error,omitempty"`
}

// messages is GET /api/v1/topics/{topic}/queues/{queue}/messages?last=N[&stream=S]: the
// last N messages of a queue, oldest first, decoded with the format of stream S (default:
// the first stream declared over the topic).
func (c *console) messages(w http.ResponseWriter, r *http.Request) {
	if !c.needBroker(w) {
		return
	}
	topic := r.PathValue("topic")
	t, ok := c.b.Topic(topic)
	if !ok {
		apiError(w, http.StatusNotFound, "", "topic "+strconv.Quote(topic)+" does not exist")
		return
	}
	q, err := strconv.Atoi(r.PathValue("queue"))
	if err != nil || q < 0 || q >= t.Queues {
		apiError(w, http.StatusNotFound, "", "topic "+topic+" has queues 0 to "+strconv.Itoa(t.Queues-1)+", not "+strconv.Quote(r.PathValue("queue")))
		return
	}
	last, err := queryInt(r, "last", 20, 1, 1000)
	if err != nil {
		apiError(w, http.StatusBadRequest, "", err.Error())
		return
	}
	var def *Stream
	if name := r.URL.Query().Get("stream"); name != "" {
		d, ok := c.e.Stream(name)
		if !ok || d.Options["connector"] != "broker" || d.Topic != topic {
			apiError(w, http.StatusBadRequest, "", "stream "+strconv.Quote(name)+" is not declared over topic "+topic)
			return
		}
		def = &d
	} else {
		for _, d := range c.e.Streams() {
			if d.Options["connector"] == "broker" && d.Topic == topic {
				def = &d
				break
			}
		}
	}
	lo, _ := c.b.MinOffset(topic, q)
	hi, _ := c.b.MaxOffset(topic, q)
	msgs, err := c.b.Peek(topic, q, max(lo, hi-last), int(last))
	if err != nil {
		apiError(w, http.StatusInternalServerError, "", err.Error())
		return
	}
	out := map[string]any{"topic": topic, "queue": q, "min_offset": lo, "max_offset": hi}
	var format connectors.Format
	var schema sql.Schema
	if def != nil {
		schema = def.Schema
		out["stream"], out["format"], out["columns"] = def.Name, def.Options["format"], columnsJSON(schema)
		if format, err = connectors.NewFormat(def.Options["format"], schema); err != nil {
			out["format_error"] = err.Error()
		}
	}
	list := make([]messageJSON, 0, len(msgs))
	for _, m := range msgs {
		mj := messageJSON{Offset: m.QueueOffset, StoreTime: msText(m.StoreTimestamp), BornTime: msText(m.BornTimestamp),
			Key: m.Key, Tags: m.Tags, Properties: m.Properties}
		if utf8.Valid(m.Body) {
			mj.Body = ptr(string(m.Body))
		} else {
			mj.BodyBase64 = base64.StdEncoding.EncodeToString(m.Body)
		}
		if format != nil {
			row, err := format.Decode(m.Body, nil)
			if err != nil {
				mj.DecodeError = err.Error()
			} else {
				mj.Values = make([]any, len(row))
				for i, v := range row {
					t := sql.Type{Kind: v.K}
					if i < len(schema) {
						t = schema[i].Type
					}
					mj.Values[i] = jsonValue(v, t)
				}
			}
		}
		list = append(list, mj)
	}
	out["messages"] = list
	writeJSON(w, http.StatusOK, out)
}

// msText is an epoch-millisecond time as RFC 3339 text, or nil for 0.
func msText(ms int64) *string {
	if ms <= 0 {
		return nil
	}
	return wmText(ms)
}
