# A correct Accelerate training script for BERT text classification, in the handout's shape
# (a Trainer class with train/evaluate/test and a main()), with the handout's bugs fixed:
#   - the Accelerator exists before anything touches a device; prepare() is called ONCE
#   - the world size is accelerator.num_processes, never torch.cuda.device_count()
#   - evaluation uses gather_for_metrics, which drops the samples the sampler padded in
#   - the test loader is prepared too, so every rank tests a distinct shard
#   - saving: wait_for_everyone(), unwrap_model() (no "module." keys), save_pretrained on the main
#     process only; reloading goes through from_pretrained on that local directory
#   - AdamW comes from torch.optim: transformers 5 no longer exports one
# Everything is offline and tiny: a BERT built from a BertConfig, a WordPiece vocabulary trained
# here by `tokenizers` on a synthetic sentiment data set (a sentence is positive when it contains a
# positive word).
# Negative controls: a vocabulary trained on each rank (token ids differ), an unprepared loader (every rank
# reads every sample), even_batches=False (no wrap-around padding), plain gather (padded duplicates are
# counted), one more step inside no_sync (the ranks' weights part), a checkpoint saved from the DDP wrapper
# instead of the unwrapped model (from_pretrained finds none of its "module." keys), the model before training.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 \
#       snippets/end-to-end/bert_classification_trainer.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import random
import tempfile
from collections import Counter
from types import SimpleNamespace

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list, set_seed
from sklearn.metrics import classification_report
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from torch.utils.data import DataLoader, Dataset
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast
from transformers.utils import logging as transformers_logging

import _claims

LABELS = ["negative", "positive"]
POSITIVE = ["good", "great", "excellent", "wonderful", "lovely", "superb", "brilliant", "enjoyable"]
NEGATIVE = ["bad", "awful", "terrible", "poor", "boring", "horrible", "dreadful", "dull"]
FILLER = "the movie film plot story music acting actors script ending was is really quite very and but a its".split()


def synthetic_sentences(n, seed):
    """Filler words plus one or two sentiment words of the label's polarity."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randint(0, 1)
        words = rng.choices(FILLER, k=rng.randint(4, 9))
        for _ in range(rng.randint(1, 2)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(POSITIVE if label else NEGATIVE))
        rows.append((" ".join(words), label))
    return rows


def train_vocabulary(texts):
    """A WordPiece vocabulary learned from our own texts: no download."""
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    wordpiece.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials))
    return wordpiece.get_vocab()  # token -> id; the ids of "##" pieces change from one process to another


class ClassificationDataset(Dataset):
    def __init__(self, rows, tokenizer, max_len):
        texts, labels = zip(*rows)
        self.encoded = tokenizer(list(texts), padding="max_length", truncation=True, max_length=max_len,
                                 return_tensors="pt")
        self.labels = torch.tensor(labels)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        item = {key: value[index] for key, value in self.encoded.items()}
        item["labels"] = self.labels[index]
        item["sample_id"] = torch.tensor(index)  # to check which rank saw which sample
        return item


class Trainer:
    def __init__(self, args, model_engine, criterion, optimizer, accelerator):
        self.args = args
        self.model_engine = model_engine
        self.criterion = criterion
        self.optimizer = optimizer
        self.accelerator = accelerator

    def on_step(self, batch_data):
        inputs = {key: batch_data[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
        return self.model_engine(**inputs).logits, batch_data["labels"]

    def train(self, train_loader, dev_loader=None):
        ids_per_epoch = []
        for epoch in range(self.args.epochs):
            self.model_engine.train()
            seen = []
            for batch_data in train_loader:
                logits, label = self.on_step(batch_data)
                loss = self.criterion(logits, label)
                self.optimizer.zero_grad()
                self.accelerator.backward(loss)  # DDP all-reduces the gradients here
                self.optimizer.step()
                seen += batch_data["sample_id"].tolist()
            ids_per_epoch.append(seen)
            if dev_loader is not None:
                accuracy = self.test(self.model_engine, dev_loader, LABELS)[1]
                self.accelerator.print(f"epoch {epoch}: last loss {loss.item():.3f}, dev accuracy {accuracy:.3f}")
        return ids_per_epoch

    @torch.no_grad()
    def evaluate(self, model_engine, loader, gather=None):
        """Predictions, labels and sample ids of the WHOLE evaluation set, on every rank."""
        gather = gather or self.accelerator.gather_for_metrics  # drops the padding of the last batch
        model_engine.eval()
        predictions, labels, ids = [], [], []
        for batch_data in loader:
            # a no-op for prepared loaders (they already place batches); the unprepared control yields CPU tensors
            batch_data = {key: value.to(self.accelerator.device) for key, value in batch_data.items()}
            inputs = {key: batch_data[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
            pred = model_engine(**inputs).logits.argmax(dim=-1)
            pred, label, sample_id = gather((pred, batch_data["labels"], batch_data["sample_id"]))
            predictions += pred.tolist()
            labels += label.tolist()
            ids += sample_id.tolist()
        return predictions, labels, ids

    def test(self, model_engine, test_loader, labels):
        predictions, truth, _ = self.evaluate(model_engine, test_loader)
        report = classification_report(truth, predictions, labels=[0, 1], target_names=labels, digits=3,
                                       zero_division=0)
        accuracy = sum(p == t for p, t in zip(predictions, truth)) / len(truth)
        return report, accuracy


def main():
    accelerator = Accelerator()  # first: it creates the process group and picks this rank's device
    args = SimpleNamespace(epochs=3, batch_size=16, lr=5e-3, max_len=16, seed=0)  # no argparse: runs anywhere
    set_seed(args.seed)

    train_rows, dev_rows, test_rows = synthetic_sentences(320, 1), synthetic_sentences(64, 2), synthetic_sentences(101, 3)
    # WordPiece training is not deterministic across processes (tokenizers issue #1794): train the
    # vocabulary once, on the main process, and send it to the others, or every rank numbers tokens its own way
    own_vocab = train_vocabulary([text for text, _ in train_rows])
    vocab = broadcast_object_list([own_vocab])[0]  # accelerate.utils: from the main process to all
    tokenizer = BertTokenizerFast(vocab=vocab)  # transformers 5: an alias of BertTokenizer, takes a vocab dict
    datasets = [ClassificationDataset(rows, tokenizer, args.max_len) for rows in (train_rows, dev_rows, test_rows)]
    train_loader = DataLoader(datasets[0], batch_size=args.batch_size, shuffle=True)
    dev_loader, test_loader = (DataLoader(d, batch_size=args.batch_size) for d in datasets[1:])

    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=args.max_len, num_labels=len(LABELS))
    model = BertForSequenceClassification(config)  # random weights from the config: nothing downloaded
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    criterion = torch.nn.CrossEntropyLoss()

    # ONE prepare for everything, the test loader included; no .cuda(), no second prepare for testing
    model_engine, optimizer_engine, train_loader_engine, dev_loader_engine, test_loader_engine = accelerator.prepare(
        model, optimizer, train_loader, dev_loader, test_loader
    )
    trainer = Trainer(args, model_engine, criterion, optimizer_engine, accelerator)

    untrained_accuracy = trainer.test(model_engine, test_loader_engine, LABELS)[1]
    ids_per_epoch = trainer.train(train_loader_engine, dev_loader_engine)
    report, accuracy = trainer.test(model_engine, test_loader_engine, LABELS)
    accelerator.print(report)

    # Which samples did the ranks train on? (all_gather_object is called by every rank)
    def overlap(ids):
        everyone = [None] * accelerator.num_processes
        dist.all_gather_object(everyone, sorted(ids))
        return len(set.intersection(*(set(rank_ids) for rank_ids in everyone)))

    def ids_differing_between_ranks(vocabulary):
        everyone = [None] * accelerator.num_processes
        dist.all_gather_object(everyone, vocabulary)
        tokens = set().union(*everyone)
        return sum(len({v.get(token) for v in everyone}) > 1 for token in tokens)

    def spread_between_ranks(module):
        """Largest difference between this rank's weights and rank 0's (a collective)."""
        flat = torch.cat([p.detach().flatten() for p in module.parameters()])
        everyone = accelerator.gather(flat.unsqueeze(0))
        return (everyone - everyone[0]).abs().max().item()

    shared_vocab_differences = ids_differing_between_ranks(tokenizer.get_vocab())
    own_vocab_differences = ids_differing_between_ranks(own_vocab)  # control: each rank trained its own
    train_overlap = max(overlap(epoch_ids) for epoch_ids in ids_per_epoch)
    unprepared_overlap = overlap([i for batch in train_loader for i in batch["sample_id"].tolist()])
    # 101 test sentences do not split into 2 x 16: even_batches=True (the default) pads the last round with
    # samples from the start, so some ids reach both ranks. Control: the same loader with even_batches=False.
    uneven_overlap = overlap([i for batch in test_loader_engine for i in batch["sample_id"].tolist()])
    # (what join_uneven_inputs(..., even_batches=False) sets on GPUs; on MULTI_CPU that context has no effect)
    sampler = test_loader_engine.batch_sampler  # a BatchSamplerShard
    padding, sampler.even_batches = getattr(sampler, "even_batches", True), False
    try:
        uneven_overlap_unpadded = overlap([i for batch in test_loader_engine for i in batch["sample_id"].tolist()])
    finally:
        sampler.even_batches = padding

    _, _, counted_ids = trainer.evaluate(model_engine, test_loader_engine)
    _, _, plain_gather_ids = trainer.evaluate(model_engine, test_loader_engine, gather=accelerator.gather)
    _, _, unprepared_test_ids = trainer.evaluate(model_engine, test_loader)  # the handout tests on this one

    # Save like the main process should, then reload through the real from_pretrained code path
    accelerator.wait_for_everyone()  # every rank has finished its last optimizer step
    unwrapped = accelerator.unwrap_model(model_engine)  # the bare BertForSequenceClassification
    with tempfile.TemporaryDirectory() as own_dir:
        shared = [own_dir]
        dist.broadcast_object_list(shared, src=0)  # rank 0's directory (use a shared disk across machines)
        save_dir, wrapper_dir = shared[0], shared[0] + "/saved_from_wrapper"
        # transformers 5 has no save_function argument any more; is_main_process decides who writes
        unwrapped.save_pretrained(save_dir, is_main_process=accelerator.is_main_process)
        # control: the same save with unwrap_model left out (the wrapper's "module."-prefixed state dict)
        unwrapped.save_pretrained(wrapper_dir, state_dict=model_engine.state_dict(),
                                  is_main_process=accelerator.is_main_process)
        if accelerator.is_main_process:
            tokenizer.save_pretrained(save_dir)
        accelerator.wait_for_everyone()  # nobody reads before the main process has written
        reloaded = BertForSequenceClassification.from_pretrained(save_dir).to(accelerator.device).eval()
        reloaded_tokenizer = BertTokenizerFast.from_pretrained(save_dir)
        set_seed(1)  # the keys from_pretrained does not find are initialised at random
        verbosity = transformers_logging.get_verbosity()
        transformers_logging.set_verbosity_error()  # its long MISSING/UNEXPECTED key table is the point, not news
        try:
            from_wrapper = BertForSequenceClassification.from_pretrained(wrapper_dir).to(accelerator.device).eval()
        finally:
            transformers_logging.set_verbosity(verbosity)
        accelerator.wait_for_everyone()  # rank 0 deletes its directory when it leaves this block

    texts = [text for text, _ in test_rows]
    with torch.no_grad():
        unwrapped.eval()
        # THIS rank's trained model against the weights the main process saved: equal only if DDP kept
        # the replicas identical
        trained_logits = unwrapped(**tokenizer(texts, padding=True, return_tensors="pt").to(accelerator.device)).logits
        reloaded_logits = reloaded(**reloaded_tokenizer(texts, padding=True, return_tensors="pt").to(accelerator.device)).logits
        from_wrapper_logits = from_wrapper(**tokenizer(texts, padding=True, return_tensors="pt").to(accelerator.device)).logits

    # Synchronisation: after 30 steps the replicas are identical; one more step inside no_sync (each rank
    # on its own batch, no all-reduce) is the control. Last, because it changes the weights.
    synced_spread = spread_between_ranks(unwrapped)
    model_engine.train()
    batch_data = next(iter(train_loader_engine))
    with accelerator.no_sync(model_engine):
        logits, label = trainer.on_step(batch_data)
        optimizer_engine.zero_grad()
        accelerator.backward(criterion(logits, label))
    optimizer_engine.step()
    unsynced_spread = spread_between_ranks(unwrapped)

    _claims.equal(
        "ranks_share_one_vocabulary",
        measured=shared_vocab_differences,
        control=own_vocab_differences,
        expected=0,
        vocabulary=tokenizer.vocab_size,
    )
    _claims.equal(
        "ranks_train_on_disjoint_samples",
        measured=train_overlap,
        control=unprepared_overlap,
        expected=0,
        train_samples=len(datasets[0]),
        samples_per_rank_per_epoch=len(ids_per_epoch[0]),
    )
    _claims.between(
        "uneven_dataset_sends_padding_samples_to_both_ranks",
        measured=uneven_overlap,
        control=uneven_overlap_unpadded,
        low=1,
        high=args.batch_size,  # padding completes the last round: less than a batch per rank, never the dataset
        test_samples=len(datasets[2]),
        batch_size=args.batch_size,
    )
    _claims.equal(
        "evaluation_counts_each_test_sample_once",
        # [predictions returned, distinct sample ids among them]: 101 and 101 means each sample exactly once
        measured=[len(counted_ids), len(set(counted_ids))],
        control=[len(plain_gather_ids), len(set(plain_gather_ids))],
        expected=[len(datasets[2]), len(datasets[2])],
        distinct_ids=len(set(counted_ids)),
        most_counted=max(Counter(counted_ids).values()),
        plain_gather_most_counted=max(Counter(plain_gather_ids).values()),
        unprepared_loader_count=len(unprepared_test_ids),
    )
    _claims.at_most(
        "replicas_identical_after_training",
        measured=synced_spread,
        control=unsynced_spread,
        tolerance=1e-7,
        steps_per_rank=sum(len(ids) for ids in ids_per_epoch) // args.batch_size,
    )
    _claims.at_most(
        "reloaded_model_predicts_identically",
        measured=(reloaded_logits - trained_logits).abs().max().item(),
        control=(from_wrapper_logits - trained_logits).abs().max().item(),
        tolerance=1e-6,
    )
    _claims.at_least(
        "trained_accuracy_well_above_chance",
        measured=accuracy,
        control=untrained_accuracy,
        bound=0.9,
        test_samples=len(datasets[2]),
        parameters=sum(p.numel() for p in unwrapped.parameters()),
    )

main()
