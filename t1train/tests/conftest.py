import torch

# One intra-op thread: these models are tiny, and on a shared machine OpenMP's threads wait on
# each other far longer than they compute.
torch.set_num_threads(1)
