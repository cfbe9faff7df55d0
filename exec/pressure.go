package exec

import (
	"unsafe"

	"rsql/sql"
)

// pressure is an operator's hold on its job's input. An operator with a bounded cache
// over a store (an aggregation without a window, a Top-N or deduplication, a regular or
// interval join) keeps in memory the state it changed since its last checkpoint: that
// state may not leave before a checkpoint holding it commits (agg_cache.go). With input
// faster than checkpoints commit it would grow with the input rate times the commit
// time, which grows with it. When it reaches pressFactor times the cache the operator
// holds the job's input: the root stages read none (Job.pressed, stage.run) until a
// checkpoint has saved the state, and the operator lets go.
type pressure struct {
	// press is Job.press: it tells the job on (hold) and off (let go); nil: never, as when
	// the job takes no periodic checkpoint (nothing would relieve it).
	press func(on bool)
	on    bool // told the job on last
}

// pressFactor is how many times its cache an operator's state that may not leave memory
// reaches before the job's input waits for the checkpoint that lets it go.
const pressFactor = 4

// pressBytes is how many bytes of rows the joins of a job may put in memory between two
// checkpoints (each join its share: joinOp.joins) before one holds the job's input: a
// join's rows are wide (both sides' columns), so a bound in rows alone (its cache's) let a
// checkpoint interval hold hundreds of megabytes of them, written again as one batch of
// the checkpoint. A quarter of it asks for a checkpoint.
const pressBytes = 16 << 20

// rowBytes is about the memory a copy of r takes (ownRow): its values and their strings.
func rowBytes(r sql.Row) int {
	n := len(r) * int(unsafe.Sizeof(sql.Value{}))
	for i := range r {
		n += len(r[i].S)
	}
	return n
}

// holdIf holds the job's input when over is true and it does not already.
func (p *pressure) holdIf(over bool) {
	if over && p.press != nil && !p.on {
		p.on = true
		p.press(true)
	}
}

// relieve lets the job's input go: a checkpoint saved the state, or the operator closes.
func (p *pressure) relieve() {
	if p.on {
		p.on = false
		p.press(false)
	}
}
