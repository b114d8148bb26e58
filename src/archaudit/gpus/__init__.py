"""GPUs: what GPUs and their runtimes do, apart from any wheel.

cuda (NVIDIA's architectures and CUDA's rules), amd (AMD's targets), selection (which entry of a
container the CUDA runtime loads on a GPU), predict (what the driver answers), rocm (which AMD
bundle entry ROCm selects and whether it loads). Imports only the shared vocabulary (model,
findings, errors) and the data tables, never read/, judge/, report/, cli/, smoke/ or index/.
"""
