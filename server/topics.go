package server

import (
	"rsql/broker"
	"rsql/sql"
)

// showTopics lists the bundled broker's topics (system topics hidden) with their queue
// count and how many messages they hold.
func (e *Engine) showTopics() (*Result, error) {
	b := e.cfg.Broker
	if b == nil {
		return nil, sql.Errorf(sql.CodeNotSupported, "SHOW TOPICS needs the bundled broker, and this rsql runs none: use `rsql server` or `rsql`")
	}
	cols := sql.Schema{{Name: "topic", Type: sql.TypeVarchar}, {Name: "queues", Type: sql.TypeInt},
		{Name: "messages", Type: sql.TypeBigInt}}
	var rows []sql.Row
	for _, t := range b.Topics() {
		if broker.IsSystemTopic(t.Name) {
			continue
		}
		var n int64
		for q := 0; q < t.Queues; q++ {
			lo, err1 := b.MinOffset(t.Name, q)
			hi, err2 := b.MaxOffset(t.Name, q)
			if err1 == nil && err2 == nil {
				n += hi - lo
			}
		}
		rows = append(rows, sql.Row{sql.Varchar(t.Name), sql.Int(int64(t.Queues)), sql.BigInt(n)})
	}
	return &Result{Columns: cols, Rows: &sliceRows{rows: rows}, Tag: "SHOW"}, nil
}
