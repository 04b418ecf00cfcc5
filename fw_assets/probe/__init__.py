"""The probe step: each kept document's loss under a probe model, per dump (`probe_loss`)."""
