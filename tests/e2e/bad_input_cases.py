"""The bad-input battery's table (see bad_inputs.py): one row per case."""
from bad_input_fixtures import *  # noqa: F401,F403  (fixtures, train, ev, disk helpers)

# ---------------------------------------------------------------- the table
def train(*extra, data=D, ckpt=CK, metrics=METRICS):
    """A train command that would overwrite the kept metrics file and resume from the kept
    checkpoint if it got past validation."""
    opts = {"--model": "mlp", "--batch-size": "8", "--max-steps": "2", "--lr": "0.01",
            "--data": data, "--ckpt-dir": ckpt, "--metrics": metrics}
    rest = list(extra)
    while rest and rest[0] in opts:  # a case's own value replaces the default (no repeats)
        opts[rest[0]] = rest[1]
        rest = rest[2:]
    a = ["train"]
    for k, v in opts.items():
        if v:
            a += [k, v]
    return a + rest


def ev(ckpt, data=D, *extra):
    return ["eval", "--ckpt", ckpt, "--data", data, "--device", "cpu"] + list(extra)


def readonly_tmpfs(name):
    """An empty read-only tmpfs (for --snapshot-dir), or None where mounting is not allowed."""
    root = f"{W}/{name}"
    if not try_mount(root, "size=1m"):
        return None
    return root if subprocess.run(["mount", "-o", "remount,ro", root], capture_output=True).returncode == 0 else None


# name, argv (or a function returning (argv, disk_root_or_None)), keywords, env, exit code
CASES = [
    # config file and flags
    ("config_unknown_key", train("--config", f"{CFG}/unknown_key.toml"), ["unknown_key.toml", "batchsize", "not a known key"], {}, 2),
    ("config_wrong_type", train("--config", f"{CFG}/wrong_type.toml"), ["batch_size", "must be an integer"], {}, 2),
    ("config_float_for_int", train("--config", f"{CFG}/float_for_int.toml"), ["epochs", "must be an integer"], {}, 2),
    ("config_negative_batch", train("--config", f"{CFG}/neg_batch.toml"), ["batch_size = -4", "out of range"], {}, 2),
    ("config_negative_lr", train("--config", f"{CFG}/neg_lr.toml"), ["lr = -0.1", "out of range", "> 0"], {}, 2),
    ("config_zero_epochs", train("--config", f"{CFG}/zero_epochs.toml"), ["epochs = 0", "out of range"], {}, 2),
    ("config_missing_file", train("--config", f"{W}/nope.toml"), ["config file", "nope.toml", "does not exist"], {}, 2),
    ("config_invalid_toml", train("--config", f"{CFG}/invalid.toml"), ["invalid.toml", "not valid TOML", "line 2"], {}, 2),
    ("flag_zero_batch", train("--batch-size", "0"), ["--batch-size = 0", "out of range"], {}, 2),
    ("flag_zero_lr", train("--lr", "0"), ["--lr = 0", "out of range"], {}, 2),
    ("flag_negative_epochs", train("--epochs", "-3"), ["--epochs = -3", "out of range"], {}, 2),
    ("flag_negative_snapshot_every", train("--snapshot-every", "-1"), ["--snapshot-every = -1", "out of range"], {}, 2),
    ("flag_snapshot_nice_above_19", train("--snapshot-every", "2", "--snapshot-nice", "20"), ["--snapshot-nice = 20", "out of range"], {}, 2),
    ("snapshot_dir_on_disk", train("--snapshot-every", "1", "--snapshot-dir", os.path.dirname(PLUGINS)), ["--snapshot-dir", "is not in memory", "slow disk checkpoint"], {}, 2),
    ("flag_wrong_type", train("--batch-size", "eight"), ["--batch-size", "expects an integer", "eight"], {}, 2),
    ("flag_bad_choice", train("--optimizer", "adam"), ["--optimizer", "adam", "not allowed", "sgd|adamw"], {}, 2),
    ("flag_grad_accum_indivisible", train("--grad-accum", "3"), ["--batch-size 8", "not divisible", "--grad-accum 3"], {}, 2),
    ("env_negative_collective_timeout", train(), ["HPCTRAIN_COLLECTIVE_TIMEOUT='-1'", ">= 0"], {"HPCTRAIN_COLLECTIVE_TIMEOUT": "-1"}, 2),
    ("env_bad_collective_timeout", train(), ["HPCTRAIN_COLLECTIVE_TIMEOUT", "abc"], {"HPCTRAIN_COLLECTIVE_TIMEOUT": "abc"}, 2),
    # command line
    ("cli_unknown_flag", train("--bogus-flag", "1"), ["--bogus-flag", "hpctrain --help"], {}, 2),
    ("cli_unknown_subcommand", ["frobnicate"], ["frobnicate", "hpctrain --help"], {}, 2),
    ("cli_missing_required", ["eval", "--data", D], ["--ckpt", "required"], {}, 2),
    ("cli_no_data_dir", train(data=None), ["no data directory", "--data"], {}, 2),
    # data files
    ("data_missing_dir", train(data=f"{W}/no-such-dir"), ["no-such-dir/train.h5", "does not exist"], {}, 2),
    ("data_not_hdf5", train(data=f"{BAD}/not_hdf5"), ["not_hdf5/train.h5", "not an HDF5 file"], {}, 2),
    ("data_missing_dataset", train(data=f"{BAD}/no_labels"), ["no_labels/train.h5", "'labels' not found"], {}, 2),
    ("data_wrong_rank", train(data=f"{BAD}/wrong_rank"), ["'images'", "shape [64]", "expected [N, d1..dk]"], {}, 2),
    ("data_unsupported_dtype", train(data=f"{BAD}/int16"), ["'images'", "int16", "supported: uint8, float16, float32"], {}, 2),
    ("data_float_labels", train(data=f"{BAD}/float_labels"), ["'labels'", "float32", "must be integers"], {}, 2),
    ("data_label_out_of_range", train(data=f"{BAD}/label_range"), ["label 7 at index 5", "outside [0, 4)"], {}, 2),
    ("data_negative_label", train(data=f"{BAD}/neg_label"), ["label -1 at index 9", "outside"], {}, 2),
    ("data_count_mismatch", train(data=f"{BAD}/count"), ["'labels' has 60 entries", "'images' has 64 samples"], {}, 2),
    ("data_truncated_file", train(data=f"{BAD}/truncated"), ["truncated/train.h5", "truncated"], {}, 2),
    ("data_missing_test_file", train(data=f"{BAD}/no_test"), ["no_test/test.h5", "does not exist"], {}, 2),
    ("eval_data_missing", ev(CK, f"{W}/no-such-dir"), ["no-such-dir/test.h5", "does not exist"], {}, 2),
    # checkpoints
    ("ckpt_missing_manifest", train("--resume", no_manifest), ["--resume", "no manifest.json"], {}, 2),
    ("ckpt_missing_shard", train("--resume", no_shard), ["--resume", f"shard file {SHARD} is missing"], {}, 2),
    ("ckpt_checksum_mismatch", train("--resume", flipped), [SHARD, FLIP_TENSOR, "checksum mismatch"], {}, 2),
    ("ckpt_truncated_shard", train("--resume", trunc_shard), ["trunc_shard", SHARD], {}, 2),
    ("ckpt_resume_other_model", train("--model", "cnn", "--resume", STEP), ["cannot resume from ", "--resume none", "does not match the model", "missing keys [classifier.2.bias", "unexpected keys [features.3.bias", "shape mismatches [classifier.0.bias: saved [4] vs model [256]"], {}, 2),
    ("ckpt_resume_auto_other_model", train("--model", "cnn"), ["cannot resume from ", "/step-0", "--resume auto: the newest checkpoint in --ckpt-dir", "--resume none", "does not match the model"], {}, 2),
    ("ckpt_resume_shape_mismatch", train("--resume", STEP, data=D12), ["cannot resume from ", "--resume none", "does not match the model", "shape mismatches [", "saved [512,64] vs model [512,144]"], {}, 2),
    ("ckpt_eval_other_model", ev(other_model), ["does not match the model", "missing keys [classifier.2.bias", "unexpected keys [features.3.bias"], {}, 2),
    ("ckpt_eval_shape_mismatch", ev(CK, D12), ["takes samples of shape [1,8,8]", "[1,12,12]"], {}, 2),
    ("ckpt_resume_not_checkpoint", train("--resume", D), ["--resume", "neither a checkpoint step directory nor a checkpoint root"], {}, 2),
    ("ckpt_resume_missing_path", train("--resume", f"{W}/no-such-ckpt"), ["--resume", "no-such-ckpt", "does not exist"], {}, 2),
    ("ckpt_eval_data_file_as_ckpt", ev(f"{D}/train.h5"), ["train.h5", "tensor images", "no dtype attribute"], {}, 2),
    ("ckpt_verify_checksum", ["ckpt", "verify", flipped], [SHARD, "file checksum mismatch", FLIP_TENSOR], {}, 2),
    ("ckpt_verify_truncated_shard", ["ckpt", "verify", trunc_shard], [SHARD, "bytes, the manifest says", "truncated"], {}, 2),
    ("ckpt_verify_swapped_shard", ["ckpt", "verify", swapped], [f"swapped/step-00000002/{SHARD}", "file checksum mismatch"], {}, 2),
    ("ckpt_resume_swapped_shard", train("--resume", swapped), ["--resume", SHARD, "file checksum mismatch"], {}, 2),
    ("ckpt_verify_malformed_shard_checksum", ["ckpt", "verify", bad_sum], ["bad_sum/step-00000002/manifest.json", SHARD, "malformed checksum", "not-a-checksum", "16 hex digits"], {}, 2),
    ("ckpt_eval_malformed_shard_checksum", ev(bad_sum), ["manifest.json", "malformed checksum"], {}, 2),
    ("ckpt_merge_out_dir_missing", ["ckpt", "merge", CK, "--out", f"{W}/no-such-dir/w.pt"], ["--out", "no-such-dir/w.pt", "does not exist"], {}, 2),
    ("ckpt_merge_unknown_extension", ["ckpt", "merge", CK, "--out", f"{W}/w.onnx"], ["w.onnx", "cannot tell the format", "'.onnx'", ".safetensors"], {}, 2),
    ("ckpt_merge_format_contradicts", ["ckpt", "merge", CK, "--out", f"{W}/w.pt", "--format", "safetensors"], ["--format safetensors contradicts", "w.pt"], {}, 2),
    ("ckpt_merge_full_not_h5", ["ckpt", "merge", CK, "--out", f"{W}/w.safetensors", "--full"], ["--full", "needs an .h5 output"], {}, 2),
    # a warning, not an error: the counters stay int64 and the merge succeeds (exit 0)
    ("ckpt_merge_dtype_non_float", ["ckpt", "merge", f"{CK_CNN}/latest", "--out", f"{W}/cnn-fp16.safetensors", "--dtype", "fp16"],
     ["warning:", "--dtype fp16", "not floating point", "kept as they are", "features.1.num_batches_tracked (int64)"], {}, 0),
    # model plugins (--model-lib) and models that do not fit the data
    ("plugin_missing", train("--model", "x", "--model-lib", f"{W}/nope.so"), ["--model-lib", "nope.so", "does not exist"], {}, 2),
    ("plugin_not_a_library", train("--model", "x", "--model-lib", f"{D}/train.h5"), ["--model-lib", "train.h5", "cannot be loaded", "invalid ELF header"], {}, 2),
    ("plugin_undefined_symbol", train("--model", "x", "--model-lib", f"{PLUGINS}/libundefined_symbol.so"),
     ["cannot be loaded", "undefined symbol: hpctrain_test_symbol_nobody_defines"], {}, 2),
    ("plugin_registers_nothing", train("--model", "x", "--model-lib", f"{PLUGINS}/libno_models.so"), ["libno_models.so", "registers no model", "HPCTRAIN_REGISTER_MODEL"], {}, 2),
    ("plugin_unknown_name", train("--model", "nosuch", "--model-lib", TLIB),
     ['unknown model "nosuch"', "registers wrong_classes, wrong_input, env_width, stray_parameter"], {}, 2),
    ("model_unknown_name", train("--model", "vgg"), ['unknown model "vgg"', "zoo: mlp, cnn, resnet", "--model-lib"], {}, 2),
    ("model_output_wrong_classes", train("--model", "wrong_classes", "--model-lib", TLIB),
     ["model output [8,7] does not fit targets [8] with 4 classes", "cross_entropy needs [8,4]"], {}, 2),
    ("model_fails_on_first_batch", train("--model", "wrong_input", "--model-lib", TLIB),
     ["wrong_input fails on a batch of this data", "input [8,1,8,8]", "targets [8]", "mat1 and mat2"], {}, 2),
    ("model_parameter_off_device", train("--model", "stray_parameter", "--model-lib", TLIB),
     ["tensor stray is on meta", "the run's device is cpu"], {}, 2),
    ("plugin_eval_without_lib", ev(PCK), ["env_width", f"from the plugin {TLIB}", "pass --model-lib"], {}, 2),
    ("plugin_resume_without_lib", train("--model", "env_width", "--resume", PCK), ['unknown model "env_width"', f"pass --model-lib {TLIB}"], {}, 2),
    # launch
    ("launch_cuda_without_gpu", train("--device", "cuda"), ["--device cuda needs a CUDA GPU", "0 visible GPU(s)", "--device cpu"], {}, 2),
    ("launch_cuda_index", train("--device", "cuda:3"), ["--device cuda:3", "0 visible GPU(s)"], {}, 2),
    ("launch_eval_cuda_without_gpu", ["eval", "--ckpt", CK, "--data", D, "--device", "cuda"], ["needs a CUDA GPU"], {}, 2),
    ("launch_unknown_device", train("--device", "tpu"), ["--device tpu", "unknown device"], {}, 2),
    ("launch_thread_level", train(), ["thread level 1", "MPI_THREAD_MULTIPLE"],
     {"LD_PRELOAD": f"{PLUGINS}/libpreload_thread_level.so", "PRELOAD_MPI_THREAD_LEVEL": "1"}, 2),
    # disk
    ("disk_ckpt_dir_under_file", train(ckpt=f"{KEEP}/not_a_dir.txt/ck"), ["cannot prepare", "not_a_dir.txt/ck"], {}, 2),
    ("disk_metrics_under_file", train(metrics=f"{KEEP}/not_a_dir.txt/m.jsonl"), ["metrics file", "not_a_dir.txt/m.jsonl"], {}, 2),
    ("disk_write_fault", lambda: (train("--max-steps", "4", "--ckpt-async=false", ckpt=fresh_ckpt("fault"), metrics=None), f"{W}/fault/ck"),
     ["checkpoint step-00000004 failed", "rank 0", "step-00000004.tmp/shard-", "Input/output error"],
     {"LD_PRELOAD": f"{PLUGINS}/libpreload_write_eio.so", "PRELOAD_WRITE_EIO_PATH": f"{W}/fault/ck/step-00000004.tmp/shard-"}, 2),
    ("disk_full_tmpfs", lambda: (lambda ck: (train("--max-steps", "4", ckpt=ck, metrics=None), ck) if ck else None)(prepare_full_disk()),
     ["checkpoint step-00000004 failed", "rank 0", "No space left on device"], {}, 2),
    ("snapshot_dir_not_writable", lambda: (lambda r: (train("--snapshot-every", "1", "--snapshot-dir", r), None) if r else None)(readonly_tmpfs("ro-snap")),
     ["--snapshot-dir", "ro-snap", "is not writable"], {}, 2),
    ("disk_readonly_ckpt_dir", lambda: (lambda ck: (train("--max-steps", "4", ckpt=ck, metrics=None), ck) if ck else None)(prepare_readonly_disk()),
     ["checkpoint step-00000004 failed", "cannot create", "step-00000004.tmp", "Read-only file system"], {}, 2),
    # token data and language models
    ("lm_token_id_too_large", train("--model", "gpt", "--seq-len", "16", data=f"{BAD}/tok_big_id"),
     ["tok_big_id/train.h5", "token id 300 at position 77", "outside [0, 256)"], {}, 2),
    ("lm_float_tokens", train("--model", "gpt", "--seq-len", "16", data=f"{BAD}/tok_float"),
     ["tok_float/train.h5", "'tokens' has dtype float32", "must be integers"], {}, 2),
    ("lm_missing_vocab_size", train("--model", "gpt", "--seq-len", "16", data=f"{BAD}/tok_no_vocab"),
     ["tok_no_vocab/train.h5", "'vocab_size'"], {}, 2),
    ("lm_vocab_differs", train("--model", "gpt", "--seq-len", "16", data=f"{BAD}/tok_vocab_mix"),
     ["train-00001.h5 has vocab_size 512", "train-00000.h5 has 256"], {}, 2),
    ("lm_no_seq_len", train("--model", "gpt", data=TOK), ["tokens/train.h5 holds a token stream", "--seq-len"], {}, 2),
    ("lm_seq_len_too_large", train("--model", "gpt", "--seq-len", "5000", data=TOK),
     ["--seq-len 5000 is larger than", "stream of 2000 tokens"], {}, 2),
    ("lm_seq_len_on_images", train("--seq-len", "16"), ["--seq-len 16 is for token data", "no 'tokens' dataset"], {}, 2),
    ("lm_image_model_on_tokens", train("--seq-len", "16", data=TOK), ["model mlp takes images", "--model gpt"], {}, 2),
    ("lm_gpt_on_images", train("--model", "gpt"), ["model gpt needs token data", "--seq-len"], {}, 2),
    ("lm_model_config_unknown", train("--model", "gpt", "--seq-len", "16", "--model-config", "n_layers=2", data=TOK),
     ["--model-config: unknown key n_layers", "allowed: n_layer, n_head, n_embd"], {}, 2),
    ("lm_model_config_heads", train("--model", "gpt", "--seq-len", "16", "--model-config", "n_embd=30,n_head=4", data=TOK),
     ["n_embd 30 is not divisible by n_head 4"], {}, 2),
    ("lm_negative_id", train("--model", "gpt", "--seq-len", "16", data=f"{BAD}/tok_neg"),
     ["tok_neg/train.h5", "token id -1 at position 55", "outside [0, 256)"], {}, 2),
    ("lm_2d_tokens", train("--model", "gpt", "--seq-len", "16", data=f"{BAD}/tok_2d"),
     ["tok_2d/train.h5", "'tokens' has 2 dimensions", "1-D"], {}, 2),
    ("lm_empty_tokens", train("--model", "gpt", "--seq-len", "16", data=f"{BAD}/tok_empty"),
     ["tok_empty/train.h5", "dataset 'tokens' is empty"], {}, 2),
    ("lm_test_vocab_differs", train("--model", "gpt", "--seq-len", "16", data=f"{BAD}/tok_test_vocab"),
     ["tok_test_vocab", "the test set has vocab_size 512", "training set has vocab_size 256"], {}, 2),
    ("lm_bad_id_streamed", train("--model", "gpt", "--seq-len", "16", "--data-in-memory-mb", "0", data=f"{BAD}/tok_big_id_late",
                                 ckpt=None, metrics=None),
     ["tok_big_id_late/train.h5", "token id 300 at position 1900", "outside [0, 256)"], {}, 2),
    ("lm_bad_id_lazy", train("--model", "gpt", "--seq-len", "16", "--data-in-memory-mb", "0", "--validate-tokens", "lazy",
                             "--flight-records", "0", data=f"{BAD}/tok_lazy", ckpt=None, metrics=None),
     ["rank ", "tok_lazy/train.h5", "token id 300 at position 20", "outside [0, 256)"], {}, 2),
    ("lm_eval_vocab_differs", ev(GCK, f"{BAD}/tok_test_vocab"), ["vocab_size 256", "test set", "has 512"], {}, 2),
    ("lm_eval_image_ckpt_on_tokens", ev(CK, TOK),
     ["tokens/test.h5 holds a token stream", "model mlp was not trained on token data"], {}, 2),
    ("lm_eval_lm_ckpt_on_images", ev(GCK, D),
     ["language model gpt was trained on token windows (seq_len 16)", "data/test.h5 has no 'tokens' dataset"], {}, 2),
    ("lm_generate_prompt_id_outside", ["generate", "--ckpt", GCK, "--prompt-tokens", "5,256", "--max-new-tokens", "3"],
     ["prompt token 256", "outside the vocabulary [0, 256)"], {}, 2),
    ("lm_generate_negative_prompt_id", ["generate", "--ckpt", GCK, "--prompt-tokens", "-1", "--max-new-tokens", "3"],
     ["prompt token -1", "outside the vocabulary"], {}, 2),
    ("lm_generate_empty_prompt", ["generate", "--ckpt", GCK, "--prompt", "", "--max-new-tokens", "3"],
     ["the prompt is empty"], {}, 2),
    ("lm_generate_text_other_tokenizer", ["generate", "--ckpt", gpt2_tok, "--prompt", "hi", "--max-new-tokens", "3"],
     ["--prompt TEXT needs the checkpoint's tokenizer", '"gpt2"', "--prompt-tokens"], {}, 2),
    ("lm_generate_top_k_over_vocab", ["generate", "--ckpt", GCK, "--prompt", "hi", "--top-k", "300", "--max-new-tokens", "3"],
     ["--top-k 300 is larger than the vocabulary", "vocab_size 256", "at most 256"], {}, 2),
    ("lm_generate_image_ckpt", ["generate", "--ckpt", CK, "--prompt", "hi", "--max-new-tokens", "3"],
     ["holds model mlp", "not trained on token data"], {}, 2),
]
