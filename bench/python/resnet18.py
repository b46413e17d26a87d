import torch, torchvision, memfit

net = torchvision.models.resnet18()
model = memfit.from_torch(net, torch.randn(1, 3, 224, 224))
plan = memfit.plan(model=model, batch=64, budget="1GiB", policy="auto")
print(f"batch 64 in 1 GiB: arena {plan['arena_bytes']:,} bytes, {plan['swapped_values']} swapped, {plan['recomputed_values']} recomputed")
print("largest batch in 1 GiB:", memfit.max_batch(model=model, budget="1GiB", policy="auto")["max_batch"])
result = memfit.train(model=model, batch=8, synthetic=True, epochs=1, limit=32, log=None,
                      on_step=lambda r: print(f"step {r['step']}/{r['steps']} loss {r['loss']:.4f}"))
print("loaded into the module:", len(memfit.load_into(net, result)), "tensors")
