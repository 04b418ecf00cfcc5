"""Files one step writes and another reads, each with its one writer and reader: Megatron's token
files (`indexed_dataset`), the document index beside them (`doc_index`), probe losses
(`probe_losses`), the raw manifest (`manifest`) and a dump's source file set (`dump_files`)."""
