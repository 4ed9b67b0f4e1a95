"""The tools the model can call: files, exec and memory."""
