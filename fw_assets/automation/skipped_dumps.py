"""What a sensor's tick says of the dumps it skipped because a generation record cannot be trusted
(fw_assets.formats.lineage.generation_state): each by name, with the command that makes it again.
The other dumps are handled as ever."""

SHOWN = 3


def skipped_note(refused: dict[str, str]) -> str:
    """` Skipped N dump(s) …: <refusals>` for a tick's skip reason; "" when none was skipped."""
    if not refused:
        return ""
    shown = " ".join(refusal for _, refusal in sorted(refused.items())[:SHOWN])
    more = f" And {len(refused) - SHOWN} more (the tick's log names each)." if len(refused) > SHOWN else ""
    return f" Skipped {len(refused)} dump(s) whose generation record cannot be trusted: {shown}{more}"
