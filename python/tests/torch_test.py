"""shardps.torch against real ps daemons, through a step-shaped adapter over shardps.Client
(the step's own tags are worker_test's business): embeddings pull each distinct id once and
push coalesced gradients equal to torch's own; bags match torch.nn.EmbeddingBag; dense
parameters are pulled in place; declare() and the job checks; evaluating() reads one state."""

import json
import unittest

import numpy as np
import torch
import torch.nn.functional as F

import shardps
import shardps.torch as spt
from cluster import PsCluster

SGD1 = {"type": "sgd", "learning_rate": 1.0}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.users = spt.ShardedEmbedding("users", None, 4)       # dynamic
        self.items = spt.ShardedEmbeddingBag("items", 20, 4, mode="mean")
        self.head = torch.nn.Linear(8, 1)

    def forward(self, users, items):
        return self.head(torch.cat([self.users(users), self.items(items)], dim=1)).squeeze(1)


class ClientStep:
    """The part of shardps.Step that shardps.torch uses, over a Client; records the calls."""

    def __init__(self, client, job, apply=True):
        self.client = client
        self.job = job
        self.apply = apply  # False: pushes are recorded, not sent
        self.row_pulls = []
        self.pushes = []

    def full(self, name):
        return self.job.variables[name].full_name

    def pull(self, names=None, *, out=None):
        names = list(names)
        outs = {self.full(n): a for n, a in (out or {}).items()}
        values = self.client.pull_many([self.full(n) for n in names], out=outs)
        return {n: values[self.full(n)] for n in names}

    def pull_rows(self, ids):
        self.row_pulls.append({n: np.array(i) for n, i in ids.items()})
        values = self.client.pull_rows_many({self.full(n): i for n, i in ids.items()})
        return {n: values[self.full(n)] for n in ids}

    def push(self, grads=None, *, rows=None):
        self.pushes.append((grads, rows))
        if not self.apply:
            return
        self.client.push_many({self.full(n): g for n, g in grads.items()})
        if rows:
            self.client.push_rows_many({self.full(n): r[0] for n, r in rows.items()},
                                       {self.full(n): r[1] for n, r in rows.items()})


class TorchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = PsCluster(2)
        cls.client = shardps.Client(cls.cluster.addresses)
        torch.manual_seed(3)
        cls.model = Model()
        spec = {"name": "tt", "batch_size": 4, "examples_per_epoch": 8, "mode": "async",
                "seed": 1, "variables": spt.declare(cls.model)}
        cls.job = shardps.Job(json.dumps(spec))
        cls.client.create_variables(
            [shardps.Variable(v.full_name, (None, *v.shape[1:]) if v.dynamic else v.shape,
                              initializer={"type": "random_normal", "stddev": 0.5, "seed": 5},
                              optimizer=SGD1) for v in cls.job.variables.values()],
            partitioner="fixed:2")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.close()

    def test_declare_names_every_parameter_and_table(self):
        declared = {v["name"]: v for v in spt.declare(self.model)}
        self.assertEqual(sorted(declared), ["head.bias", "head.weight", "items", "users"])
        self.assertEqual(declared["users"]["shape"], [None, 4])
        self.assertEqual(declared["users"]["access"], "rows")
        self.assertEqual(declared["items"]["shape"], [20, 4])
        # torch's Linear default: uniform in +-1/sqrt(fan_in), for the bias too.
        bound = 1 / np.sqrt(8)
        for name in ("head.weight", "head.bias"):
            init = declared[name]["initializer"]
            self.assertAlmostEqual(init["maxval"], bound)
            self.assertAlmostEqual(init["minval"], -bound)

    def test_a_step_pulls_distinct_ids_once_and_pushes_torchs_own_gradients(self):
        users = torch.tensor([7, 1 << 40, 7, 3])
        items = torch.tensor([[0, 5], [5, 5], [19, 0], [2, 3]])
        labels = torch.tensor([1.0, 0.0, 1.0, 0.0])
        opt = spt.DistributedOptimizer(self.model)
        step = ClientStep(self.client, self.job)
        before = {n: self.client.pull(self.job.variables[n].full_name).copy()
                  for n in ("head.weight", "head.bias")}
        user_rows = self.client.pull_rows(self.job.variables["users"].full_name, users.numpy())
        item_rows = self.client.pull_rows(self.job.variables["items"].full_name,
                                          np.arange(20))
        with opt.use(step):
            # The dense parameters were pulled into the module itself.
            np.testing.assert_array_equal(self.model.head.weight.detach().numpy(),
                                          before["head.weight"])
            loss = F.binary_cross_entropy_with_logits(self.model(users, items), labels)
            loss.backward()
            opt.step()
        self.assertEqual(len(step.row_pulls), 2)
        self.assertEqual(sorted(step.row_pulls[0]["users"].tolist()), [3, 7, 1 << 40])
        self.assertEqual(sorted(step.row_pulls[1]["items"].tolist()), [0, 2, 3, 5, 19])
        # The same model in plain torch, from the same values.
        u = torch.tensor(user_rows, requires_grad=True)
        table = torch.tensor(item_rows, requires_grad=True)
        w = torch.tensor(before["head.weight"], requires_grad=True)
        b = torch.tensor(before["head.bias"], requires_grad=True)
        bag = F.embedding_bag(items, table, mode="mean")
        logits = (torch.cat([u, bag], dim=1) @ w.t() + b).squeeze(1)
        F.binary_cross_entropy_with_logits(logits, labels).backward()
        grads, rows = step.pushes[0]
        np.testing.assert_allclose(grads["head.weight"], w.grad.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(grads["head.bias"], b.grad.numpy(), rtol=1e-5, atol=1e-7)
        ids, row_grads = rows["items"]
        self.assertEqual(sorted(ids.tolist()), [0, 2, 3, 5, 19])  # each once: coalesced
        for i, g in zip(ids, row_grads):
            np.testing.assert_allclose(g, table.grad[i].numpy(), rtol=1e-5, atol=1e-7)
        ids, row_grads = rows["users"]
        self.assertEqual(sorted(ids.tolist()), [3, 7, 1 << 40])
        # Row 7 appears twice: its gradient is the sum of both rows' in plain torch.
        where = {int(k): j for j, k in enumerate(ids)}
        np.testing.assert_allclose(row_grads[where[7]], (u.grad[0] + u.grad[2]).numpy(),
                                   rtol=1e-5, atol=1e-7)
        # The ps applied SGD(1) to exactly those gradients.
        after = self.client.pull(self.job.variables["head.bias"].full_name)
        np.testing.assert_allclose(after, before["head.bias"] - b.grad.numpy(), rtol=1e-5)

    def test_prefetched_rows_give_the_same_gradients_in_one_pull(self):
        users = torch.tensor([7, 1 << 40, 7, 3])
        items = torch.tensor([[0, 5], [5, 5], [19, 0], [2, 3]])
        labels = torch.tensor([1.0, 0.0, 1.0, 0.0])
        opt = spt.DistributedOptimizer(self.model)
        pushes = []
        for ids in (None, {"users": users, "items": items}):
            step = ClientStep(self.client, self.job, apply=False)
            with opt.use(step, ids=ids):
                F.binary_cross_entropy_with_logits(self.model(users, items), labels).backward()
                opt.step()
            pushes.append(step.pushes[0])
            if ids is not None:  # one call for both tables, before the forward
                self.assertEqual(len(step.row_pulls), 1)
                self.assertEqual(sorted(step.row_pulls[0]), ["items", "users"])
        (dense_a, rows_a), (dense_b, rows_b) = pushes
        for name in dense_a:
            np.testing.assert_allclose(dense_a[name], dense_b[name], rtol=1e-6, atol=1e-8)
        for table in ("users", "items"):
            a = dict(zip(rows_a[table][0].tolist(), rows_a[table][1]))
            b = dict(zip(rows_b[table][0].tolist(), rows_b[table][1]))
            self.assertEqual(sorted(a), sorted(b))
            for k in a:
                np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-8)
        with self.assertRaisesRegex(shardps.InvalidArgument, "id 9 was not in use"):
            with opt.use(ClientStep(self.client, self.job, apply=False),
                         ids={"users": users, "items": items}):
                self.model.users(torch.tensor([9]))

    def test_dense_parameters_are_pulled_in_place(self):
        opt = spt.DistributedOptimizer(self.model)
        pointer = self.model.head.weight.data_ptr()
        with opt.use(ClientStep(self.client, self.job)):
            self.assertEqual(self.model.head.weight.data_ptr(), pointer)
            np.testing.assert_array_equal(
                self.model.head.weight.detach().numpy(),
                self.client.pull(self.job.variables["head.weight"].full_name))

    def test_a_model_the_job_does_not_declare_is_refused_by_name(self):
        other = torch.nn.Sequential(torch.nn.Linear(8, 2))
        opt = spt.DistributedOptimizer(other)
        with self.assertRaisesRegex(shardps.InvalidArgument, "parameter '0.weight' is not a "
                                    "variable of job 'tt'"):
            opt.use(ClientStep(self.client, self.job))

        class Wrong(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.users = spt.ShardedEmbedding("users", 100, 4)  # the job's is dynamic
        with self.assertRaisesRegex(shardps.InvalidArgument, "ShardedEmbedding 'users' is "
                                    r"\[100, 4\]; job 'tt' declares \[0, 4\] \(dynamic\)"):
            spt.DistributedOptimizer(Wrong()).use(ClientStep(self.client, self.job))

    def test_bad_ids_and_lookups_outside_a_scope(self):
        with self.assertRaisesRegex(shardps.FailedPrecondition, "inside opt.use"):
            self.model.users(torch.tensor([1]))
        opt = spt.DistributedOptimizer(self.model)
        with opt.use(ClientStep(self.client, self.job)):
            with self.assertRaisesRegex(shardps.InvalidArgument, r"id 20 is outside \[0, 20\)"):
                self.model.items(torch.tensor([[1, 20]]))
            with self.assertRaisesRegex(shardps.InvalidArgument, "integer tensor"):
                self.model.users(torch.tensor([1.5]))
            with self.assertRaisesRegex(shardps.InvalidArgument, "2-D"):
                self.model.items(torch.tensor([1, 2]))

    def test_evaluating_reads_the_named_rows_once(self):
        class State:  # an EvalState's pull over the client
            pulls = []

            def pull(state, names, rows):
                state.pulls.append((list(names), {n: list(i) for n, i in rows.items()}))
                step = ClientStep(self.client, self.job)
                out = step.pull(names)
                out.update(step.pull_rows(rows))
                return out
        state = State()
        users = torch.tensor([4, 9, 4])
        items = torch.tensor([[1, 2], [2, 2], [3, 1]])
        with spt.evaluating(state, self.model, ids={"users": users, "items": items}):
            with torch.no_grad():
                got = self.model(users, items)
            with self.assertRaisesRegex(shardps.InvalidArgument, "id 5 was not read"):
                self.model.users(torch.tensor([5]))
        self.assertEqual(len(state.pulls), 1)
        self.assertEqual(state.pulls[0][1], {"users": [4, 9], "items": [1, 2, 3]})
        u = self.client.pull_rows(self.job.variables["users"].full_name, [4, 9, 4])
        t = self.client.pull_rows(self.job.variables["items"].full_name, np.arange(20))
        w = self.client.pull(self.job.variables["head.weight"].full_name)
        b = self.client.pull(self.job.variables["head.bias"].full_name)
        bag = t[items.numpy()].mean(axis=1)
        want = (np.concatenate([u, bag], axis=1) @ w.T + b)[:, 0]
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
