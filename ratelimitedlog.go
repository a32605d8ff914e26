package eddy

import (
	"log/slog"
	"sync"
	"time"
)

// rateLimitedLog logs at most one warning per key every forwardWarnEvery, counting
// the ones it held back.
type rateLimitedLog struct {
	mu   sync.Mutex
	keys map[string]*limitedKey
}

type limitedKey struct {
	last time.Time
	held int
}

const forwardWarnEvery = 10 * time.Second

func (l *rateLimitedLog) warn(log *slog.Logger, key, msg string, args ...any) {
	l.mu.Lock()
	if l.keys == nil {
		l.keys = map[string]*limitedKey{}
	}
	k := l.keys[key]
	if k == nil {
		k = &limitedKey{}
		l.keys[key] = k
	}
	now := time.Now()
	if !k.last.IsZero() && now.Sub(k.last) < forwardWarnEvery {
		k.held++
		l.mu.Unlock()
		return
	}
	held := k.held
	k.last, k.held = now, 0
	l.mu.Unlock()
	log.Warn(msg, append(args, "held_back_since_last_warning", held)...)
}
