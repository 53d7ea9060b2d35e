package main

import "log/slog"

// warnModelLenClamped logs a warning when --max-model-len asks for more
// than the model's context (modelLen): the engine uses the model's, and a
// user who typed 99999 should learn that it became 4096 from the log, not
// from a request refused later.
func warnModelLenClamped(log *slog.Logger, asked, modelLen int) {
	if asked > modelLen {
		log.Warn("--max-model-len is above the model's context; using the model's",
			"max_model_len", asked, "model_max_seq_len", modelLen)
	}
}
