# One short rule per figure; each can be rebuilt alone (snakemake --cores all <rule>).

rule fig1a_throughput_vs_accuracy:
    """Figure 1a: throughput vs accuracy (batch 1)."""
    input:
        acc=f"{R}/accuracy.csv",
        thr=f"{R}/throughput.csv",
    output:
        png=report(f"{FIGURES_DIR}/fig1a_throughput_vs_accuracy.png", caption="../report/fig1a_throughput_vs_accuracy.rst", category="Figures"),
        pdf=f"{FIGURES_DIR}/fig1a_throughput_vs_accuracy.pdf",
    params:
        name="fig1a_throughput_vs_accuracy",
    log:
        f"{LOGS}/figures/fig1a_throughput_vs_accuracy.log",
    message:
        f"Figure 1a (throughput vs accuracy; speed-up) -> {{output.png}}: models {dc.role_summary(config, 'speed_bd', 'speed_ar')}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_figure.py"

rule fig1b_throughput_batch:
    """Figure 1b: throughput at batch 1 and 4."""
    input:
        thr=f"{R}/throughput.csv",
    output:
        png=report(f"{FIGURES_DIR}/fig1b_throughput_batch.png", caption="../report/fig1b_throughput_batch.rst", category="Figures"),
        pdf=f"{FIGURES_DIR}/fig1b_throughput_batch.pdf",
    params:
        name="fig1b_throughput_batch",
    log:
        f"{LOGS}/figures/fig1b_throughput_batch.log",
    message:
        f"Figure 1b (throughput by batch size) -> {{output.png}}: models {dc.role_summary(config, 'speed_bd', 'speed_ar')}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_figure.py"

rule fig_threshold_gsm8k:
    """Figure 4: accuracy and throughput vs threshold."""
    input:
        acc=f"{R}/accuracy.csv",
        thr=f"{R}/throughput.csv",
    output:
        png=report(f"{FIGURES_DIR}/fig_threshold_gsm8k.png", caption="../report/fig_threshold_gsm8k.rst", category="Figures"),
        pdf=f"{FIGURES_DIR}/fig_threshold_gsm8k.pdf",
    params:
        name="fig_threshold_gsm8k",
    log:
        f"{LOGS}/figures/fig_threshold_gsm8k.log",
    message:
        f"Figure 4 (threshold sweep) -> {{output.png}}: models {dc.role_summary(config, 'speed_bd')}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_figure.py"

rule fig_gpu_batch_throughput:
    """Figure 5: AR vs diffusion by batch size per GPU type."""
    input:
        thr=f"{R}/throughput.csv",
        gpu=dc.gpu_result_files(RESULTS),
    output:
        png=report(f"{FIGURES_DIR}/fig_gpu_batch_throughput.png", caption="../report/fig_gpu_batch_throughput.rst", category="Figures"),
        pdf=f"{FIGURES_DIR}/fig_gpu_batch_throughput.pdf",
    params:
        name="fig_gpu_batch_throughput",
    log:
        f"{LOGS}/figures/fig_gpu_batch_throughput.log",
    message:
        f"Figure 5 (AR vs diffusion by batch size, GPU) -> {{output.png}}: models {dc.role_summary(config, 'speed_bd', 'speed_ar')}; diffusion at {dc.decode_summary([dc.gpu_batch_decode(config)])}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_figure.py"

rule fig_subblock_accuracy:
    """Figure 6a: accuracy vs sub-block size, cache on/off."""
    input:
        acc=f"{R}/accuracy.csv",
    output:
        png=report(f"{FIGURES_DIR}/fig_subblock_accuracy.png", caption="../report/fig_subblock_accuracy.rst", category="Figures"),
        pdf=f"{FIGURES_DIR}/fig_subblock_accuracy.pdf",
    params:
        name="fig_subblock_accuracy",
    log:
        f"{LOGS}/figures/fig_subblock_accuracy.log",
    message:
        f"Figure 6a (accuracy vs sub-block size) -> {{output.png}}: models {dc.role_summary(config, 'ablation_bd')}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_figure.py"

rule fig_subblock_throughput:
    """Figure 6b: throughput vs sub-block size, cache on/off, batch 1 and 32."""
    input:
        thr=f"{R}/throughput.csv",
    output:
        png=report(f"{FIGURES_DIR}/fig_subblock_throughput.png", caption="../report/fig_subblock_throughput.rst", category="Figures"),
        pdf=f"{FIGURES_DIR}/fig_subblock_throughput.pdf",
    params:
        name="fig_subblock_throughput",
    log:
        f"{LOGS}/figures/fig_subblock_throughput.log",
    message:
        f"Figure 6b (throughput vs sub-block size) -> {{output.png}}: models {dc.role_summary(config, 'ablation_bd')}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_figure.py"

rule fig_attention_masks:
    """Figure 7: training and inference attention masks."""
    output:
        png=report(f"{FIGURES_DIR}/fig_attention_masks.png", caption="../report/fig_attention_masks.rst", category="Figures"),
        pdf=f"{FIGURES_DIR}/fig_attention_masks.pdf",
    params:
        name="fig_attention_masks",
    log:
        f"{LOGS}/figures/fig_attention_masks.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_figure.py"
