"""shardps.torch with the model on a CUDA device (tag `gpu`): the dense parameters are pulled
through the host into the device tensors, and the gradients pushed from the device equal the
same model's on the CPU. Skipped, saying so, where torch sees no CUDA device (Debian's
PyTorch is CPU-only: run it with a CUDA build of torch in SHARDPS_TORCH_VENV)."""

import json
import unittest

import numpy as np
import torch
import torch.nn.functional as F

import shardps
import shardps.torch as spt
from cluster import PsCluster
from torch_test import ClientStep, Model


@unittest.skipUnless(torch.cuda.is_available(), "torch sees no CUDA device (torch "
                     f"{torch.__version__}, built with CUDA: {torch.version.cuda})")
class TorchGpuTest(unittest.TestCase):
    def test_a_cuda_model_pushes_the_cpu_models_gradients(self):
        cluster = PsCluster(2)
        client = shardps.Client(cluster.addresses)
        try:
            torch.manual_seed(3)
            cpu, gpu = Model(), Model().cuda()
            spec = {"name": "gpu", "batch_size": 4, "examples_per_epoch": 8, "mode": "async",
                    "seed": 1, "variables": spt.declare(cpu)}
            job = shardps.Job(json.dumps(spec))
            client.create_variables(
                [shardps.Variable(v.full_name, (None, *v.shape[1:]) if v.dynamic else v.shape,
                                  initializer={"type": "random_normal", "stddev": 0.5,
                                               "seed": 5},
                                  optimizer={"type": "sgd", "learning_rate": 1.0})
                 for v in job.variables.values()], partitioner="fixed:2")
            users = torch.tensor([7, 1 << 40, 7, 3])
            items = torch.tensor([[0, 5], [5, 5], [19, 0], [2, 3]])
            labels = torch.tensor([1.0, 0.0, 1.0, 0.0])
            pushes = []
            for model, device in ((cpu, "cpu"), (gpu, "cuda")):
                step = ClientStep(client, job, apply=False)
                opt = spt.DistributedOptimizer(model)
                with opt.use(step):
                    self.assertEqual(model.head.weight.device.type, device)
                    logits = model(users.to(device), items.to(device))
                    F.binary_cross_entropy_with_logits(logits, labels.to(device)).backward()
                    opt.step()
                pushes.append(step.pushes[0])
            (dense_cpu, rows_cpu), (dense_gpu, rows_gpu) = pushes
            for name in dense_cpu:
                np.testing.assert_allclose(dense_gpu[name], dense_cpu[name], rtol=1e-4,
                                           atol=1e-6)
            for table in rows_cpu:
                np.testing.assert_array_equal(np.sort(rows_gpu[table][0]),
                                              np.sort(rows_cpu[table][0]))
        finally:
            client.close()
            cluster.close()


if __name__ == "__main__":
    unittest.main()
