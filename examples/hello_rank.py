"""A demo worker: prints what gangrun told it, then agrees with its peers through a file."""
import os
import socket

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
print(f"hello from rank {rank} of {world} on {socket.gethostname()} "
      f"(local rank {os.environ['LOCAL_RANK']}, MASTER_PORT {os.environ['MASTER_PORT']}, "
      f"run {os.environ['GANGRUN_RUN_ID']})", flush=True)
