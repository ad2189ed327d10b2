package console

import "github.com/lmq-gateway/lmq-gateway/ops"

// rowOf is a queue's row from its inventory view, without rates and age.
// Size counts waiting and in-flight messages (LMQ's size).
func rowOf(v *ops.QueueView) Row {
	return Row{
		Name:        v.Name,
		Waiting:     v.Size - min(v.InFlight, v.Size),
		InFlight:    v.InFlight,
		Delayed:     v.Delayed,
		DeadLetters: v.DeadLetters,
		Bytes:       v.Bytes,
		Paused:      v.Props.Paused,
	}
}
