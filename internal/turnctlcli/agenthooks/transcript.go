package agenthooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// tailSizes are how much of a transcript's end LastAssistantID reads: a
// small tail first, a larger one if a huge tool result fills it.
var tailSizes = []int64{64 << 10, 1 << 20}

// errNoAssistant: the tail holds no assistant entry.
var errNoAssistant = errors.New("no assistant message at the end of the transcript")

// LastAssistantID returns the uuid of the last assistant entry of a Claude
// Code transcript (JSONL, one entry per line, each with "type" and "uuid";
// an assistant entry has "type": "assistant"). It reads only the file's
// tail, so it costs the same for a long session as for a short one. A last
// line still being written is skipped. Anything but a regular file is
// refused without waiting on it (a FIFO's open would wait for a writer).
func LastAssistantID(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", path)
	}
	for _, n := range tailSizes {
		off := max(fi.Size()-n, 0)
		buf := make([]byte, fi.Size()-off)
		if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
			return "", err
		}
		if off > 0 {
			// The first line is cut: start after it.
			if i := bytes.IndexByte(buf, '\n'); i >= 0 {
				buf = buf[i+1:]
			} else {
				buf = nil
			}
		}
		if id := lastAssistant(buf); id != "" {
			return id, nil
		}
		if off == 0 {
			break
		}
	}
	return "", errNoAssistant
}

func lastAssistant(buf []byte) string {
	for len(buf) > 0 {
		i := bytes.LastIndexByte(bytes.TrimRight(buf, "\n"), '\n')
		line := buf[i+1:]
		buf = buf[:max(i, 0)]
		// Cheap test before decoding: most lines are tool results.
		if !bytes.Contains(line, []byte(`"assistant"`)) {
			continue
		}
		var e struct {
			Type string `json:"type"`
			UUID string `json:"uuid"`
		}
		if json.Unmarshal(line, &e) == nil && e.Type == "assistant" && e.UUID != "" {
			return e.UUID
		}
	}
	return ""
}
