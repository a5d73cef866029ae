from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

#: the S3 API server of the object-store tests (``s3_endpoint``, ``s3_bucket``)
pytest_plugins = ["tests.s3_server"]

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FAULTS = Path(__file__).resolve().parent / "faults"

#: tests that took 2 s or more (setup, call and teardown) in a run of the whole
#: suite on two busy cores (``pytest --durations=0``): subprocesses, clusters of
#: their own, real data; a parametrized test is listed once, all its cases slow
SLOW = frozenset(
    {
        "test_append_transactions.py::test_a_corpus_swap_killed_midway_is_restored_by_the_next_writer",
        "test_append_transactions.py::test_a_fit_while_an_append_is_under_way_trains_on_the_committed_parts",
        "test_append_transactions.py::test_a_model_swap_killed_midway_is_restored_by_the_next_reader",
        "test_append_transactions.py::test_a_pending_append_whose_process_is_gone_is_quarantined_by_a_rescan",
        "test_append_transactions.py::test_an_append_killed_before_its_commit_adds_its_documents_once_on_retry",
        "test_append_transactions.py::test_an_append_landing_while_a_fit_reads_the_corpus_leaves_the_fit_consistent",
        "test_bitflips_corpus.py::test_single_bit_flips_in_part_files_never_load_silently",
        "test_bitflips_corpus.py::test_single_bit_flips_in_the_manifest_and_vocabulary_never_load_silently",
        "test_checkpoint.py::test_corrupt_row_group_names_file_and_keeps_last_checkpoint",
        "test_checkpoint.py::test_resumed_run_equals_uninterrupted_on_local_cluster",
        "test_checkpoint.py::test_retraining_takes_in_added_and_removed_files",
        "test_cli.py::test_a_fit_logged_to_a_file_says_each_start_phase_and_lap",
        "test_cli.py::test_a_picture_that_fails_leaves_no_model_and_no_empty_file",
        "test_cli.py::test_corpus_lda_pipeline",
        "test_cli.py::test_demo_on_local_cluster",
        "test_cli.py::test_fit_and_report_compares_dense",
        "test_cli.py::test_fit_command",
        "test_cli.py::test_fit_dense_svi_no_restarts",
        "test_cli.py::test_fit_errors",
        "test_cli.py::test_fit_from_a_saved_models_topics",
        "test_cli.py::test_fit_gmm_batches_per_update_reproduces_a_cluster_run_in_process",
        "test_cli.py::test_fit_gmm_sync",
        "test_cli.py::test_fit_hdp_then_topics",
        "test_cli.py::test_fit_hdp_then_transform",
        "test_cli.py::test_fit_hdp_with_moves_ends_with_fewer_topics",
        "test_cli.py::test_fit_overwrite",
        "test_cli.py::test_pipeline_folder_and_main",
        "test_cli.py::test_pipeline_on_synthetic_images",
        "test_cli.py::test_python_m_lsdask_error_exit_code",
        "test_cli.py::test_run_bars_demo_learns_bars",
        "test_cli.py::test_run_bars_demo_with_an_hdp_finds_the_ten_bars_from_thirty",
        "test_cli.py::test_transform_command",
        "test_cli.py::test_transform_dashboard_address",
        "test_cli_checkpoint.py::test_a_scheduler_killed_mid_fit_gets_one_line_and_keeps_the_checkpoint",
        "test_cli_checkpoint.py::test_ctrl_c_to_the_process_group_stops_a_cluster_fit_with_a_checkpoint",
        "test_cli_checkpoint.py::test_resume_takes_in_part_files_removed_from_the_corpus",
        "test_cli_checkpoint.py::test_sigterm_during_an_ingest_leaves_no_temporary_folder",
        "test_cli_checkpoint.py::test_sigterm_writes_a_checkpoint_and_resume_finishes",
        "test_corpus.py::test_random_csr_matrices_round_trip_exactly",
        "test_dirichlet_prior.py::test_one_newton_step_is_gensims_update_dir_prior",
        "test_early_stopping.py::test_a_checkpointed_fit_resumed_equals_one_never_stopped",
        "test_early_stopping.py::test_hdp_early_stopping_on_a_local_cluster_equals_in_process",
        "test_early_stopping.py::test_lda_scores_its_own_prior_on_held_out_batches",
        "test_early_stopping.py::test_lsdask_fit_says_which_lap_it_kept",
        "test_early_stopping.py::test_the_best_lap_is_kept_and_the_run_ends_after_patience",
        "test_engine.py::test_a_script_without_a_main_guard_is_told_how_to_fix_it",
        "test_engine.py::test_default_starts_and_closes_its_own_local_cluster",
        "test_engine.py::test_in_memory_data_survives_a_lost_worker",
        "test_engine.py::test_lda_transform_on_a_client_equals_in_process",
        "test_engine.py::test_local_cluster_equals_in_process_on_numpy_and_dask_arrays",
        "test_engine.py::test_local_cluster_equals_in_process_on_zarr",
        "test_engine.py::test_local_cluster_workers_do_not_run_the_profiler",
        "test_engine.py::test_own_local_cluster_listens_on_loopback_only",
        "test_engine.py::test_scheduler_task_count_stays_flat_over_ten_laps",
        "test_engine.py::test_worker_killed_mid_run_gives_the_undisturbed_result",
        "test_errors.py::test_non_finite_in_a_zarr_chunk_names_the_store_and_chunk",
        "test_estimators.py::test_zarr_dask_and_numpy_inputs_agree",
        "test_esvi_lda.py::test_checkpoint_without_a_tolerance_resumes_with_every_pass",
        "test_esvi_lda.py::test_cli_fit_esvi",
        "test_esvi_lda.py::test_damaged_checkpoint_is_a_clear_error",
        "test_esvi_lda.py::test_dask_equals_in_process_and_each_worker_holds_its_block",
        "test_esvi_lda.py::test_estimator_resume_equals_uninterrupted",
        "test_esvi_lda.py::test_lost_worker_resumes_equal",
        "test_esvi_lda.py::test_resume_after_a_killed_driver_equals_uninterrupted",
        "test_esvi_lda.py::test_schedule_equals_numpy_alg5",
        "test_esvi_lda.py::test_topk_defaults_to_the_sparsity",
        "test_esvi_lda_partitioned.py::test_closed_client_is_a_clear_error",
        "test_esvi_lda_partitioned.py::test_partitioned_fit_transform_score_save_load",
        "test_esvi_mixture_resume.py::test_lost_worker_resumes_equal",
        "test_esvi_mixture_resume.py::test_resume_after_a_killed_driver_equals_uninterrupted",
        "test_esvi_nomadic.py::test_cli_fit_nomadic",
        "test_esvi_nomadic.py::test_dask_estimator_nomadic_reads_blocks_where_they_lie",
        "test_esvi_nomadic.py::test_dask_nomadic_pairs_blocks_and_resume",
        "test_esvi_nomadic.py::test_in_process_resume_equals_uninterrupted",
        "test_generators.py::test_nightly_retraining_reports_new_and_removed_batches",
        "test_gibbs_sparse.py::test_draws_have_the_exact_conditional_chi_square",
        "test_gibbs_sparse.py::test_sampler_with_word_lists_visits_the_exact_posterior",
        "test_gibbs_sparse.py::test_vector_prior_equal_to_the_symmetric_one_samples_the_same",
        "test_guarded_only.py::test_only_guarded_opens_paths_below_handed_folders",
        "test_hdp.py::test_a_two_process_cluster_fit_equals_the_in_process_fit",
        "test_hdp.py::test_resume_equals_uninterrupted",
        "test_hdp.py::test_save_load_round_trip_is_exact",
        "test_hdp_delete_gain.py::test_the_quick_gain_of_each_delete_equals_the_whole_proposals",
        "test_hdp_finds_k.py::test_started_large_the_hdp_ends_at_the_true_number_of_topics",
        "test_hdp_lap_cost.py::test_a_judgement_that_accepts_nothing_keeps_the_globals_restore_would_give",
        "test_hdp_lap_cost.py::test_a_run_gives_the_numbers_of_globals_and_objective_recomputed_after_each_judgement",
        "test_hdp_moves.py::test_a_checkpoint_keeps_the_moves_owed_and_the_resume_applies_them",
        "test_hdp_moves.py::test_dask_run_equals_in_process_run",
        "test_hostile_files.py::test_damaged_files_load_or_are_refused_never_crash",
        "test_hostile_folders.py::test_a_hostile_folder_changes_nothing_outside_and_fails_cleanly",
        "test_hostile_folders.py::test_the_pristine_folders_pass_every_command",
        "test_ingest.py::test_20newsgroups_train_split_ingests",
        "test_install.py::test_install_run_uninstall_leaves_nothing",
        "test_install.py::test_kernel_compiles_into_the_per_user_folder",
        "test_layout.py::test_every_entry_has_a_floor",
        "test_lda.py::test_a_corpus_is_scored_transformed_and_checked_batch_by_batch_as_a_whole",
        "test_lda.py::test_corpus_path_equals_in_memory_and_local_cluster_equals_in_process",
        "test_lda.py::test_lda_bad_input",
        "test_lda.py::test_one_batch_runs_in_process_with_the_default_client",
        "test_lda.py::test_partial_fit_adds_new_documents",
        "test_lda.py::test_recovers_topics_and_scores",
        "test_lda.py::test_transform_keeps_only_the_topics_a_document_uses",
        "test_lda_api.py::test_a_matrix_fit_takes_the_words_of_its_columns",
        "test_lda_api.py::test_a_model_fitted_on_a_dask_client_pickles_without_it",
        "test_lda_gibbs.py::test_sampler_recovers_bars",
        "test_lda_gibbs.py::test_sparse_draw_has_the_exact_conditional",
        "test_lda_gibbs.py::test_sparse_sampler_visits_the_exact_posterior",
        "test_learned_priors.py::test_a_known_asymmetric_prior_is_recovered_and_scores_at_least_as_well",
        "test_learned_priors.py::test_command_line_fits_learned_priors_and_topics_shows_them",
        "test_learned_priors.py::test_fixed_priors_keep_their_statistics_and_results",
        "test_learned_priors.py::test_learned_alpha_equals_a_direct_fixed_point_fit_on_the_same_statistics",
        "test_learned_priors.py::test_resume_equals_uninterrupted",
        "test_learned_priors.py::test_save_load_round_trip_is_exact_and_older_files_load_with_their_fixed_prior",
        "test_locks.py::test_a_second_fit_on_a_checkpoint_folder_is_refused_and_the_folder_stays_resumable",
        "test_locks.py::test_a_second_holder_is_refused_naming_the_first_then_gets_it_when_it_ends",
        "test_locks.py::test_fault_points_pause_and_crash",
        "test_locks.py::test_two_appends_at_once_keep_every_document",
        "test_models.py::test_expected_log_lik_matches_monte_carlo",
        "test_patches.py::test_make_patches_script",
        "test_persist.py::test_round_trip_is_exact",
        "test_persist.py::test_save_errors",
        "test_rerun_finishes.py::test_a_command_killed_after_its_output_before_its_mark_finishes_on_rerun",
        "test_rerun_finishes.py::test_an_interrupted_command_rerun_finishes_exactly_what_it_asked",
        "test_svi_gibbs.py::test_cli_fit_svi_gibbs",
        "test_svi_gibbs.py::test_fit_learns_topics_and_keeps_them_sparse",
        "test_svi_gibbs.py::test_local_cluster_equals_in_process",
        "test_svi_gibbs_alpha.py::test_local_cluster_equals_in_process_with_a_learned_prior",
        "test_svi_gibbs_alpha.py::test_the_learned_prior_follows_the_topics_use",
        "test_svi_gibbs_replica.py::test_the_schedulers_task_count_stays_flat",
        "test_svi_gibbs_weights.py::test_the_mean_learns_better_topics_at_small_eta",
        "test_untrusted_commands.py::test_a_signal_after_an_append_is_committed_exits_0",
        "test_untrusted_commands.py::test_a_signal_after_patches_and_fit_gmm_saved_their_output_exits_0",
        "test_untrusted_commands.py::test_a_signal_at_the_fit_output_step_exits_0_and_the_rerun_trains_nothing",
        "test_untrusted_commands.py::test_a_signal_at_the_transform_output_step_exits_0_with_the_whole_output",
        "test_untrusted_commands.py::test_a_worker_lost_before_the_first_wave_gives_the_undisturbed_result",
        "test_untrusted_commands.py::test_an_unreachable_scheduler_exits_1",
        "test_untrusted_commands.py::test_svi_gibbs_stopped_by_sigterm_exits_143",
        "test_untrusted_commands.py::test_the_same_fit_over_changed_data_trains_its_laps_again",
        "test_untrusted_corpus.py::test_a_corpus_whose_parts_folder_links_into_another_is_refused",
        "test_untrusted_corpus.py::test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched",
        "test_untrusted_corpus.py::test_an_append_killed_while_it_cleans_up_after_its_commit_is_not_appended_again",
        "test_untrusted_corpus.py::test_crafted_pending_entries_are_refused_and_nothing_outside_moves",
        "test_untrusted_corpus.py::test_special_or_huge_manifest_and_vocab_are_refused_at_once",
        "test_untrusted_corpus.py::test_two_writers_of_one_output_at_once_both_succeed_in_turn",
        "test_untrusted_persist.py::test_a_checkpoint_carrying_more_sticks_than_its_model_is_refused",
        "test_untrusted_persist.py::test_a_link_in_a_checkpoint_folder_changes_nothing_it_points_to",
        "test_untrusted_persist.py::test_small_files_claiming_huge_arrays_are_refused_before_allocating",
        "test_untrusted_persist.py::test_special_files_in_a_folder_are_refused_at_once",
        "test_untrusted_zarr.py::test_a_deleted_chunk_is_an_error_naming_the_store_chunk_and_rows",
        "test_untrusted_zarr.py::test_a_fifo_or_device_as_zarr_json_is_refused_without_hanging",
        "test_untrusted_zarr.py::test_bit_flips_over_a_store_never_load_silently",
        "test_untrusted_zarr.py::test_patches_refuses_images_that_are_links_or_special_files",
    }
)


def pytest_collection_modifyitems(config, items) -> None:
    """Mark what the fast subset (``pytest -m "not slow and not cluster"``) leaves
    out: ``cluster`` for the tests on the shared LocalCluster (``dask_client``),
    ``faults`` (and ``slow``) for the fault-injection suite, ``slow`` for those
    of :data:`SLOW`."""
    for item in items:
        if item.nodeid.split("[")[0].removeprefix("tests/") in SLOW:
            item.add_marker(pytest.mark.slow)
        if "dask_client" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)
        if FAULTS in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def dask_client():
    """A real 2-process LocalCluster, shared by the engine tests."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()
